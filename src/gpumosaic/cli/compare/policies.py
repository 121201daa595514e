"""``gpumosaic compare --policies A,B --rates 1,2,3 --seeds 0-2``: the policy sweep.

Runs policies x rates x seeds with the round mechanism in parallel processes, writes
``policy_runs.csv`` (one row per run, the columns of ``runs.csv``), ``jct_vs_rate.png``
(Gavel's figure) and ``policy_table.json`` into ``out``, and prints a table (or JSON
with ``--json``).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gpumosaic.cli.progress import counter_bar
from gpumosaic.cli.tables import show
from gpumosaic.experiments.sweeps.policies import (
    PolicyRatePoint,
    SweepPoint,
    aggregate,
    plot_jct_vs_rate,
    sweep_points,
)
from gpumosaic.experiments.sweeps.runs import SweepRun, write_runs_csv

if TYPE_CHECKING:
    from gpumosaic.experiments.study.file import Experiment


def compare_policies(
    policies: list[str],
    rates: list[float],
    seeds: list[int],
    cluster: str,
    workload: str,
    placement: str,
    out: Path,
    workers: int,
    as_json: bool,
    gpus_per_node: int = 1,
) -> None:
    from gpumosaic.cli.compare.checks import check_policy_sweep

    check_policy_sweep(policies, cluster, workload, [placement])
    points = sweep_points(policies, rates, seeds, cluster, workload, placement, gpus_per_node)
    out.mkdir(parents=True, exist_ok=True)
    runs = _run(points, max(workers, 1), show_progress=not as_json, out=out)
    summary = aggregate(points, runs)
    csv_path = out / "policy_runs.csv"
    write_runs_csv(runs, csv_path)
    figure = plot_jct_vs_rate(
        summary, out / "jct_vs_rate.png", f"{workload} on {cluster}, {placement}", seeds=seeds
    )
    table = [asdict(p) for p in summary]
    (out / "policy_table.json").write_text(json.dumps(table, indent=2) + "\n")
    if as_json:
        print(
            json.dumps(
                {
                    "points": table,
                    "runs": [{**r.request.to_json(), **r.summary.to_json()} for r in runs],
                    "csv": str(csv_path),
                    "figure": str(figure),
                }
            )
        )
        return
    from gpumosaic.experiments.plots.style import seeds_label

    console = Console()
    grid = Table(
        # escaped: rich would read "[max finish-time fairness rho]" as a style and drop it
        title=escape(
            f"avg JCT (h) ± sd, [max finish-time fairness rho], (jobs completed / "
            f"rejected / unfinished) over {seeds_label(seeds)}: "
            f"{workload} on {cluster}, {placement}"
        )
    )
    grid.add_column("policy")
    for rate in rates:
        grid.add_column(f"{rate:g}/h", justify="right")
    for policy in policies:
        cells = []
        for rate in rates:
            match = [p for p in summary if p.policy == policy and p.rate_per_hour == rate]
            cells.append(
                f"{match[0].avg_jct_h:.2f} ± {match[0].std_jct_h:.2f} "
                f"[{match[0].ftf_rho_max_mean:.2f}] ({_ends(match[0])})"
                if match
                else "-"
            )
        grid.add_row(policy, *cells)
    show(grid, ("policy",), console)
    console.print(f"wrote {csv_path}, {figure}")


def _ends(point: PolicyRatePoint) -> str:
    counts = (point.completed_mean, point.rejected_mean, point.unfinished_mean)
    return " / ".join(f"{c:.0f}" if c == round(c) else f"{c:.1f}" for c in counts)


def _run(points: list[SweepPoint], workers: int, show_progress: bool, out: Path) -> list[SweepRun]:
    """The sweep's runs in the order of ``points``, through the study executor into OUT's
    result store (as ``gpumosaic run OUT/experiment.toml``: docs/experiments.md): each
    stored as it ends, the stored ones reused (a line says how many), Ctrl-C answered with
    what is stored."""
    from gpumosaic.cli.app import announce
    from gpumosaic.cli.compare.ray import stored_runs
    from gpumosaic.errors import InputError
    from gpumosaic.experiments.study.execute import execute

    study = _study(points, out)
    with counter_bar(show_progress, "policy sweep", len(points)) as update:
        outcome = execute(
            study, out, "local", workers, lambda done, _t: update(done), announce=announce
        )
    if outcome.failed:
        raise InputError(f"run(s) failed: {outcome.failed[0].error}")
    by_request = {_key(run.request): run for run in stored_runs(study, out)}
    return [by_request[_key(p.description())] for p in points]


def _key(request: object) -> str:
    return repr(request)


def _study(points: list[SweepPoint], out: Path) -> Experiment:
    """The study of ``OUT/experiment.toml`` (written here when a caller did not), checked
    to plan exactly ``points``' runs (the same run descriptions)."""
    from gpumosaic.errors import InputError
    from gpumosaic.experiments.study.compare_file import COMPARE_FILE, write_compare_experiment
    from gpumosaic.experiments.study.file import load_experiment
    from gpumosaic.experiments.study.kinds.simulate import run_description

    path = out / COMPARE_FILE
    if not path.is_file():
        first = points[0]
        write_compare_experiment(
            out, mode="sim", placements=[first.placement],
            policies=list(dict.fromkeys(p.policy for p in points)),
            seeds=list(dict.fromkeys(p.seed for p in points)), cluster=first.cluster,
            workload=first.workload, policy="", rates=list(dict.fromkeys(
                p.rate_per_hour for p in points)), tasks="", nodes="", inflate=1.0,
            gpus_per_node=first.gpus_per_node, backfill=True, sharing=["none"],
            mechanism="rounds",
        )  # fmt: skip
    study = load_experiment(path)
    planned = {_key(run_description(r.point)) for r in study.runs()}
    if planned != {_key(p.description()) for p in points} or len(planned) != len(points):
        raise InputError(f"{path} does not plan this policy sweep's runs", path=out)
    return study
