"""``gpumosaic compare --executor ray``: after the Ray tasks, the same table, notes,
``runs.csv`` and figures as the local executor prints and writes, read back from the
result store the tasks wrote (``OUT/runs/RUN_ID/``: the run description, the summary
row, the jobs and the timeline of every run).

The ``compare`` command (cli/compare/command.py) calls ``compare_on_ray``: it joins (or
starts) Ray, runs the study's tasks, then ``show_stored_comparison``; a run the store
does not hold (it failed) is left out of the table and named.
"""

from __future__ import annotations

import json
import math
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import typer

from gpumosaic.cli.app import announce, err_console
from gpumosaic.errors import InputError
from gpumosaic.experiments.study.file import Experiment
from gpumosaic.experiments.sweeps.runs import SweepRun


def stored_runs(study: Experiment, out: Path) -> list[SweepRun]:
    """The study's runs as ``SweepRun`` values, from what the store holds, in the study's
    order (runs the store lacks are skipped)."""
    from gpumosaic.experiments.results.store import ROW_FILE, read_table, run_folder
    from gpumosaic.results.result import Timeline
    from gpumosaic.run.description import RunDescription

    runs: list[SweepRun] = []
    for planned in study.runs():
        folder = run_folder(out, planned.run_id)
        if not (folder / ROW_FILE).is_file():
            continue
        row = json.loads((folder / ROW_FILE).read_text())
        description = json.loads((folder / "run.json").read_text())
        request = RunDescription.from_values(description["request"])
        jobs = read_table(out, planned.run_id, "jobs")
        timeline = read_table(out, planned.run_id, "timeline")
        assert jobs is not None and timeline is not None, planned.run_id
        measured = np.asarray(jobs.column("measured").to_pylist(), dtype=bool)
        completed = np.asarray([s == "completed" for s in jobs.column("outcome").to_pylist()])
        jct = np.asarray(jobs.column("jct_s").to_pylist(), dtype=np.float64)
        ids = np.asarray(jobs.column("job_id").to_pylist(), dtype=np.int64)

        def column(name: str, kind: Any, table: Any = timeline) -> Any:
            return np.asarray(table.column(name).to_pylist(), dtype=kind)

        runs.append(
            SweepRun(
                request=request,
                summary=_summary(row),
                jcts_s=jct[measured & completed],
                job_ids=ids[measured & completed],
                timeline=Timeline(
                    time_s=column("time_s", np.float64),
                    allocated_milli=column("allocated_milli", np.float64),
                    running=column("running", np.int64),
                    queued=column("queued", np.int64),
                    fragmentation_rate=column("fragmentation_rate", np.float64),
                    power_gpu_w=column("power_gpu_w", np.float64),
                    power_cpu_w=column("power_cpu_w", np.float64),
                ),
                kernels=str(description.get("kernels", "none")),
            )
        )
    return runs


def _summary(row: dict[str, Any]) -> Any:
    """The run's Summary from its stored row (the store writes NaN as null)."""
    from gpumosaic.fallbacks import Fallback, Fallbacks
    from gpumosaic.results.summary import Summary

    values: dict[str, Any] = {}
    for field in fields(Summary):
        if field.name == "fallbacks":
            continue
        value = row.get(field.name)
        values[field.name] = math.nan if value is None else value
    counts = []
    for kind, count in (row.get("fallbacks") or {}).get("counts", []):
        name = str(kind).rpartition(".")[2]
        found = Fallback.__members__.get(name) or next(
            (f for f in Fallback if f.value == kind), None
        )
        if found is not None:
            counts.append((found, int(count)))
    return Summary(**values, fallbacks=Fallbacks.total([Fallbacks(tuple(counts))]))


def show_stored_comparison(
    study: Experiment, out: Path, seeds_text: str, json_out: bool
) -> dict[str, Any]:
    """Print the table and notes and write runs.csv, table.json and the figures of the
    stored runs, as the local executor does; returns what ``--json`` adds (rows, files)."""
    from rich.console import Console

    from gpumosaic.cli.compare.table import (
        comparison_title,
        identical_notes,
        print_table,
        table_rows,
    )
    from gpumosaic.experiments.plots.runs import plot_comparison, plot_timelines
    from gpumosaic.experiments.sweeps.runs import write_runs_csv
    from gpumosaic.workloads.spec import parse_cluster

    runs = stored_runs(study, out)
    if not runs:
        return {}
    first = runs[0].request
    sharings = list(dict.fromkeys(r.request.sharing for r in runs))

    def cell(run: SweepRun) -> tuple[str, str]:
        return run.request.resolved_placement(), run.request.sharing

    cells = list(dict.fromkeys(map(cell, runs)))
    label_of = {c: c[0] if len(sharings) == 1 else f"{c[0]} + {c[1]}" for c in cells}
    by_label = {label_of[c]: [r for r in runs if cell(r) == c] for c in cells}
    rows = table_rows(by_label)
    write_runs_csv(runs, out / "runs.csv")
    (out / "table.json").write_text(json.dumps(rows, indent=2) + "\n")
    scenario = comparison_title(
        first.policy, first.cluster, first.workload, sharings, first.background
    )
    seeds = sorted({r.request.seed for r in runs})
    jcts = {label: [r.jcts_s for r in mine] for label, mine in by_label.items()}
    avgs = {label: [r.summary.avg_jct_s for r in mine] for label, mine in by_label.items()}
    figure = plot_comparison(
        jcts,
        avgs,
        out / "compare.png",
        scenario,
        seeds=seeds,
        completed={label: [r.summary.completed for r in mine] for label, mine in by_label.items()},
        jobs={label: [r.summary.jobs for r in mine] for label, mine in by_label.items()},
    )
    cluster = parse_cluster(first.cluster, first.gpus_per_node)
    plot_timelines(
        {label: mine[0].timeline for label, mine in by_label.items()},
        cluster.num_gpus * 1000.0,
        out / "timeline.png",
        title=scenario,
        seed=seeds[0],
    )
    if not json_out:
        print_table(rows, f"{scenario}, seeds {seeds_text}")
        for note in identical_notes(by_label, cluster):
            Console().print(note, highlight=False, soft_wrap=True)
        Console().print(f"wrote {out / 'runs.csv'}, {figure}, {out / 'timeline.png'}")
    return {"rows": rows, "csv": str(out / "runs.csv"), "figure": str(figure)}


def compare_on_ray(
    experiment: Path,
    out: Path,
    workers: int,
    address: str | None,
    timeout_s: float,
    json_out: bool,
    seeds_text: str,
) -> None:
    """The comparison as the study it wrote (``experiment``), through the study executor:
    a Ray task per run, results streamed into OUT's store as they end, stored runs skipped."""
    import sys

    from rich.console import Console

    from gpumosaic.cli.progress import counter_bar
    from gpumosaic.experiments.study.execute import execute
    from gpumosaic.experiments.study.file import load_experiment

    study = load_experiment(experiment)
    joined = False
    if address is not None:
        try:
            import ray
        except ImportError:
            raise InputError(
                "--executor ray needs Ray: pip install 'gpumosaic[ray]'", field="--executor"
            ) from None
        if not ray.is_initialized():
            join_ray(address, timeout_s)
            joined = True
    try:
        with counter_bar(not json_out and sys.stderr.isatty(), "runs") as update:
            outcome = execute(
                study,
                out,
                "ray",
                workers,
                lambda done, total: update(done, total),
                announce=None if json_out else announce,
            )
    finally:
        if joined:
            ray.shutdown()
    shown: dict[str, object] = {}
    if study.kind.name == "simulate":  # the table and figures of the local executor
        shown = show_stored_comparison(study, out, seeds_text, json_out)
    payload = {
        **shown,
        "out": str(out),
        "planned": outcome.planned,
        "skipped": outcome.skipped,
        "ran": outcome.ran,
        "failed": [{"run_id": f.run_id, "error": f.error} for f in outcome.failed],
        "elapsed_s": round(outcome.elapsed_s, 3),
    }
    if json_out:
        typer.echo(json.dumps(payload))
    else:
        Console().print(
            f"{outcome.planned} runs planned, reused {outcome.skipped} stored runs, "
            f"{outcome.ran} ran on Ray in {outcome.elapsed_s:.1f} s -> {out}\n"
            f"next: gpumosaic report {out}"
        )
    if outcome.failed:
        for error in dict.fromkeys(f.error for f in outcome.failed):
            err_console.print(f"[red]error:[/red] run(s) failed: {error}", highlight=False)
        raise typer.Exit(1)


def join_ray(address: str, timeout_s: float) -> None:
    """``ray.init(address)``, bounded and interruptible: Ray retries an unreachable head
    for many minutes and does not hear SIGTERM meanwhile. A line says what it waits for;
    a head that does not answer in ``timeout_s`` (or Ctrl-C / SIGTERM) ends the command
    with one line (exit 2; interrupted: 130 / 143)."""
    import signal
    import socket
    import threading
    import time

    import ray

    # SIGTERM is heard from before the line that says the command is joining: a signal
    # sent on that line must end it with its one line, not Python's default death.
    stop: list[int] = []
    previous = signal.getsignal(signal.SIGTERM)
    in_main = threading.current_thread() is threading.main_thread()
    if in_main:
        signal.signal(signal.SIGTERM, lambda signum, _frame: stop.append(signum))
    failure: list[BaseException] = []
    try:
        err_console.print(
            f"joining the Ray cluster at {address} (up to {timeout_s:g} s; --ray-timeout-s; "
            "Ctrl-C stops) ...",
            highlight=False,
            soft_wrap=True,
        )
        deadline = time.monotonic() + timeout_s
        host, _, port = address.removeprefix("ray://").rpartition(":")
        if host and port.isdigit():  # a plain HOST:PORT: nothing listening fails at once
            try:
                socket.create_connection((host, int(port)), timeout=timeout_s).close()
            except OSError as err:
                reason = err.strerror or type(err).__name__
                raise InputError(
                    f"cannot reach a Ray head there ({reason})",
                    field="--ray-address",
                    value=address,
                ) from None

        def connect() -> None:
            try:
                ray.init(address=address, log_to_driver=False, configure_logging=False)
            except BaseException as err:  # reported by the waiting thread
                failure.append(err)

        # A daemon thread: one that never returns cannot hold the process at exit.
        thread = threading.Thread(target=connect, name="ray-join", daemon=True)
        if not stop:
            thread.start()
        while thread.is_alive() and not stop and time.monotonic() < deadline:
            thread.join(0.2)  # short waits: Ctrl-C (KeyboardInterrupt) is heard at once
    except KeyboardInterrupt:
        stop.append(signal.SIGINT)
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, previous)
    if stop:
        err_console.print("[red]error:[/red] --ray-address: interrupted while joining Ray")
        raise typer.Exit(128 + stop[0])
    if thread.is_alive():
        raise InputError(
            f"no Ray head answered within {timeout_s:g} s (is it running? is this its GCS "
            "address, HOST:6379 by default?)",
            field="--ray-address",
            value=address,
        )
    if failure:
        raise InputError(
            f"cannot join the Ray cluster: {type(failure[0]).__name__}: {failure[0]}",
            field="--ray-address",
            value=address,
        )
