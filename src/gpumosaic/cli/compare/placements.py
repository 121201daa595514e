"""``gpumosaic compare`` in its default mode: placements (x sharing models) x seeds through
``simulate``, then the table, ``runs.csv``, the JCT figure and the occupancy timelines.
The ``compare`` command (cli/compare/command.py) checks the options and calls
``compare_placements``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from gpumosaic.cli.app import announce, err_console

if TYPE_CHECKING:
    from gpumosaic.experiments.runner import RunRequest
    from gpumosaic.experiments.sweeps.runs import SweepRun


def compare_placements(
    placement_list: list[str],
    sharings: list[str],
    seed_list: list[int],
    seeds: str,
    *,
    cluster: str,
    workload: str,
    policy: str,
    gpus_per_node: int,
    backfill: bool,
    mechanism: str,
    background: str | None,
    out: Path,
    workers: int,
    json_out: bool,
    common_jobs: bool,
) -> None:
    """Run every (placement, sharing model) on every seed and report them side by side."""
    # The simulator's comparison: its imports only now (the fill mode and --help skip them).
    from rich.console import Console

    from gpumosaic.cli.compare.table import (
        comparison_title,
        different_jobs_warning,
        identical_notes,
        print_table,
        table_rows,
    )
    from gpumosaic.experiments.runner import RunRequest
    from gpumosaic.experiments.sweeps.runs import write_runs_csv
    from gpumosaic.fallbacks import Fallbacks
    from gpumosaic.workloads.spec import parse_cluster

    # One row per (placement, sharing model); labels name the sharing model only when
    # several are compared.
    cells = [(p, m) for m in sharings for p in placement_list]
    label_of = {cell: cell[0] if len(sharings) == 1 else f"{cell[0]} + {cell[1]}" for cell in cells}
    requests = [
        RunRequest(
            cluster=cluster,
            workload=workload,
            policy=policy,
            placement=p,
            seed=s,
            gpus_per_node=gpus_per_node,
            backfill=backfill,
            sharing=m,
            mechanism=mechanism,
            background=background,
        )
        for p, m in cells
        for s in seed_list
    ]
    runs = _run_with_progress(requests, workers, enabled=not json_out, out=out)
    fallbacks = Fallbacks.total(r.summary.fallbacks for r in runs)
    if fallbacks:
        warning = fallbacks.warning()
        err_console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False, soft_wrap=True)
    labels = [label_of[cell] for cell in cells]
    by_label = {
        label_of[cell]: [r for r in runs if (r.request.placement, r.request.sharing) == cell]
        for cell in cells
    }
    rows = table_rows(by_label, common_jobs)
    if differ := different_jobs_warning(by_label, common_jobs):
        err_console.print(f"[yellow]warning:[/yellow] {differ}", highlight=False, soft_wrap=True)
    write_runs_csv(runs, out / "runs.csv")
    jcts = {p: [r.jcts_s for r in by_label[p]] for p in labels}
    avgs = {p: [r.summary.avg_jct_s for r in by_label[p]] for p in labels}
    from gpumosaic.experiments.plots.runs import plot_comparison, plot_timelines  # matplotlib: late

    scenario = comparison_title(policy, cluster, workload, sharings, background)
    figure = plot_comparison(
        jcts,
        avgs,
        out / "compare.png",
        scenario,
        seeds=seed_list,
        completed={p: [r.summary.completed for r in by_label[p]] for p in labels},
        jobs={p: [r.summary.jobs for r in by_label[p]] for p in labels},
    )
    # Over time, per placement: the first seed's run (seeds differ only in their draws).
    first = {p: by_label[p][0] for p in labels}
    total_milli = parse_cluster(cluster, gpus_per_node).num_gpus * 1000.0
    plot_timelines(
        {p: r.timeline for p, r in first.items()},
        total_milli,
        out / "timeline.png",
        title=scenario,
        seed=seed_list[0],
    )
    (out / "table.json").write_text(json.dumps(rows, indent=2) + "\n")
    if json_out:
        kernels = sorted({r.kernels for r in runs})  # aot, jit, aot+jit or none, per run
        payload = {"rows": rows, "csv": str(out / "runs.csv"), "figure": str(figure)}
        print(json.dumps({**payload, "kernels": kernels}))
    else:
        title = f"{scenario}, seeds {seeds}"
        if common_jobs:
            title += " (JCTs over the jobs every run completed)"
        print_table(rows, title)
        for note in identical_notes(by_label, parse_cluster(cluster, gpus_per_node)):
            Console().print(note, highlight=False, soft_wrap=True)
        Console().print(f"wrote {out / 'runs.csv'}, {figure}, {out / 'timeline.png'}")


def _run_with_progress(
    requests: list[RunRequest], workers: int, enabled: bool, out: Path
) -> list[SweepRun]:
    """The comparison's runs through the study executor, as ``gpumosaic run
    OUT/experiment.toml`` would run them: each stored as it ends in OUT's result store
    (``OUT/runs/RUN_ID/``, ``OUT/runs.parquet``: docs/experiments.md), the stored ones
    reused (a line says how many), Ctrl-C answered with what is stored. Returned in the
    order of ``requests``."""
    from gpumosaic.cli.compare.ray import stored_runs
    from gpumosaic.cli.progress import counter_bar
    from gpumosaic.errors import InputError
    from gpumosaic.experiments.study.compare_file import COMPARE_FILE
    from gpumosaic.experiments.study.execute import execute
    from gpumosaic.experiments.study.file import load_experiment

    study = load_experiment(out / COMPARE_FILE)
    with counter_bar(enabled, "runs", len(requests)) as update:
        outcome = execute(
            study, out, "local", workers, lambda done, _total: update(done), announce=announce
        )
    if outcome.failed:
        raise InputError(f"run(s) failed: {outcome.failed[0].error}")
    order = {_key(r): i for i, r in enumerate(requests)}
    runs = sorted(stored_runs(study, out), key=lambda run: order.get(_key(run.request), -1))
    if [_key(r.request) for r in runs] != list(order):  # the file and the options disagree
        raise InputError(f"the runs stored in {out} are not those of this comparison")
    return runs


def _key(request: RunRequest) -> tuple[object, ...]:
    return (request.placement, request.sharing, request.seed)
