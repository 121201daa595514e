"""``gpumosaic simulate``: one run of one policy and placement on one workload."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpumosaic.cli.app import app, check_out_dir, err_console, user_errors
from gpumosaic.cli.tables import show

if TYPE_CHECKING:
    from gpumosaic.mechanisms.rounds.estimation import EstimationReport
    from gpumosaic.results.result import GandivaReport
    from gpumosaic.results.summary import Summary
    from gpumosaic.run.description import RunDescription

WORKLOAD_HELP = (
    "gavel:key=value,... with jobs=N, rate=JOBS_PER_HOUR (0 = all at t=0), window=A-B "
    "(measure job ids A..B-1, generate until they finish), multigpu=on|off, "
    "milli=spatial|none; gavel-stream:rate=R,window=A-B (Gavel's own job stream, jobs "
    "A..B-1 measured); or gavel-trace:PATH, openb:NAME, or a .csv/.yaml job list"
)
CLUSTER_HELP = "MODEL:COUNT,... (e.g. v100:36,p100:36,k80:36), openb:gpu, or a node CSV"


@app.command(
    epilog="Example: gpumosaic simulate --cluster v100:4 --workload "
    "gavel:jobs=50,rate=0,milli=spatial --policy fifo --placement fgd --seed 0 --json"
)
@user_errors
def simulate(
    cluster: Annotated[str, typer.Option(help=CLUSTER_HELP)] = "v100:4",
    workload: Annotated[
        str, typer.Option(help=WORKLOAD_HELP)
    ] = "gavel:jobs=50,rate=0,milli=spatial",
    policy: Annotated[
        str,
        typer.Option(
            help="queue order (fifo, sjf, priority: event and gandiva mechanisms) or a Gavel "
            "policy (rounds). fifo is both: alone it is the queue order (auto picks the "
            "event mechanism); with --mechanism rounds it is Gavel's fifo policy"
        ),
    ] = "fifo",
    placement: Annotated[
        str | None,
        typer.Option(
            help="fgd, pwr, bestfit, firstfit, worstfit/strided, random, ... (default fgd; "
            "with --sharing gandiva: affinity, Gandiva's least-loaded order)"
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="seed of every random choice")] = 0,
    out: Annotated[Path | None, typer.Option(help="folder for jobs, summary.json, plot")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
    table_format: Annotated[str, typer.Option("--format", help="csv or parquet")] = "csv",
    gpus_per_node: Annotated[int, typer.Option(help="GPUs per server for MODEL:COUNT")] = 1,
    mechanism: Annotated[
        str,
        typer.Option(
            help="auto, event (non-preemptive), rounds (Gavel) or gandiva (Gandiva's "
            "scheduler; the same as --sharing gandiva)"
        ),
    ] = "auto",
    backfill: Annotated[
        bool,
        typer.Option(
            help="try every pending job in queue order (Kubernetes-style); "
            "--no-backfill stops at the first job that does not fit (strict FIFO)"
        ),
    ] = True,
    round_s: Annotated[float, typer.Option(help="round length (rounds mechanism)")] = 360.0,
    resolve_interval_s: Annotated[
        float, typer.Option(help="least time between policy solves (rounds mechanism)")
    ] = 1920.0,
    sharing: Annotated[
        str,
        typer.Option(
            help="none, capped, measured, nvshare:tq=30, or gandiva:packing=on,migration=on "
            "(see docs/sharing.md, docs/gandiva.md)"
        ),
    ] = "none",
    background: Annotated[
        str | None,
        typer.Option(
            help="pre-fill the cluster with tasks that never leave before the first job: "
            "openb:default[,fraction=0.8] (fraction of GPU capacity; event mechanism)"
        ),
    ] = None,
    estimate_throughputs: Annotated[
        bool,
        typer.Option(
            help="rounds: the scheduler is not told the jobs' rates; it profiles each job on "
            "the GPU models and estimates the rest from Gavel's reference jobs (Gavel "
            "section 5); jobs run at the table's rates (docs/live.md)"
        ),
    ] = False,
    allow_rejects: Annotated[
        bool, typer.Option(help="exit 0 even when some jobs can never fit")
    ] = False,
) -> None:
    """Simulate one policy + placement on a workload and report JCT, utilization, etc."""
    if table_format not in ("csv", "parquet"):
        from gpumosaic.errors import InputError

        raise InputError("must be csv or parquet", field="--format", value=table_format)
    if table_format == "parquet" and importlib.util.find_spec("pyarrow") is None:
        from gpumosaic.errors import InputError

        raise InputError(
            "Parquet needs pyarrow: pip install 'gpumosaic[parquet]'",
            field="--format",
            value=table_format,
        )
    check_out_dir(out)
    # The options' own checks first (a mistake's one line without the simulator's imports);
    # the simulator (and what it pulls in) only once a run is asked for.
    from gpumosaic.run.description import RunDescription

    request = RunDescription(
        cluster=cluster,
        workload=workload,
        policy=policy,
        placement=placement,
        seed=seed,
        gpus_per_node=gpus_per_node,
        mechanism=mechanism,
        backfill=backfill,
        round_s=round_s,
        resolve_interval_s=resolve_interval_s,
        sharing=sharing,
        background=background,
        estimate_throughputs=estimate_throughputs,
    )
    request.check_inputs()
    from rich.console import Console

    from gpumosaic.cli.progress import progress_bar
    from gpumosaic.run.build import run

    with progress_bar(enabled=not json_out and sys.stderr.isatty()) as progress:
        outcome = run(request, progress=progress)
    summary = outcome.summary
    if out is not None:
        from gpumosaic.cli.out_folder import locked_out
        from gpumosaic.experiments.store import write_run  # pandas + matplotlib: only if asked

        with locked_out(out):  # one writer at a time (a second command: one line)
            write_run(outcome.result, summary, out, table_format, meta=request.to_json())
    load = outcome.offered_load
    if json_out:
        from gpumosaic.kernel_cache import kernels_ran

        fraction = None if load is None else round(load.fraction, 4)
        background_load = outcome.result.background
        background_json = None if background_load is None else background_load.fraction
        print(
            json.dumps(
                {
                    **request.to_json(),
                    **summary.to_json(),
                    "offered_load": fraction,
                    "background_allocation": background_json,
                    "kernels": kernels_ran(),  # aot, jit, aot+jit or none
                    # Gandiva's mechanism: suspensions, packs, migrations (else null).
                    "gandiva": _gandiva_json(outcome.result.gandiva),
                    # --estimate-throughputs: profiling rounds, estimates (else null).
                    "estimation": _estimation_json(outcome.result.estimation),
                }
            )
        )
    else:
        _print_summary(summary, request, outcome.result.gandiva, outcome.result.estimation)
        if out is not None:
            Console().print(f"wrote {out}/ (jobs, timeline, summary.json, run.png)")
    prefilled = outcome.result.background
    if prefilled is not None and not json_out:
        err_console.print(
            f"background: {prefilled.placed:,} tasks of {prefilled.source} hold "
            f"{prefilled.fraction:.1%} of GPU capacity ({prefilled.skipped:,} found no place)",
            highlight=False,
            soft_wrap=True,
        )
    if load is not None and not json_out:
        err_console.print(load.line(), highlight=False, soft_wrap=True)
    if load is not None and load.fraction > 1.0:
        err_console.print(
            f"[yellow]warning:[/yellow] {load.warning()}", highlight=False, soft_wrap=True
        )
    if summary.fallbacks:
        warning = summary.fallbacks.warning()
        err_console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False, soft_wrap=True)
    rejected = outcome.never_fit_lines
    for line in rejected[:SHOWN_REJECTS]:
        err_console.print(f"[yellow]rejected:[/yellow] {line}", highlight=False, soft_wrap=True)
    if len(rejected) > SHOWN_REJECTS:
        where = "every one is in jobs.csv" if out is not None else "--out DIR lists every one"
        err_console.print(
            f"[yellow]rejected:[/yellow] ... and {len(rejected) - SHOWN_REJECTS:,} more jobs "
            f"that no server can ever hold ({where})",
            highlight=False,
            soft_wrap=True,
        )
    if rejected and not allow_rejects:
        raise typer.Exit(3)


# Jobs that can never fit are named one per line up to this many, then counted.
SHOWN_REJECTS = 10


def _gandiva_json(report: GandivaReport | None) -> dict[str, object] | None:
    from dataclasses import asdict

    return None if report is None else asdict(report)


def _estimation_json(report: EstimationReport | None) -> dict[str, float | int | None] | None:
    return None if report is None else report.to_json()


def _print_summary(
    summary: Summary,
    request: RunDescription,
    gandiva: GandivaReport | None = None,
    estimation: EstimationReport | None = None,
) -> None:
    from rich.table import Table

    # The mechanism says what --policy means (fifo: a queue order, or Gavel's policy).
    mechanism = request.resolved_mechanism()
    table = Table(
        title=f"{request.policy} ({mechanism}) + {request.resolved_placement()} on "
        f"{request.cluster}, {request.workload}, seed {request.seed}"
    )
    table.add_column("metric")
    table.add_column("value", justify="right")

    def hours(v: float) -> str:
        return "-" if math.isnan(v) else f"{v / 3600:,.2f} h"

    def number(v: float) -> str:
        return "-" if math.isnan(v) else f"{v:,.2f}"

    rows = [
        (
            "jobs (completed / rejected / unfinished)",
            f"{summary.jobs} ({summary.completed} / {summary.rejected} / {summary.unfinished})",
        ),
        ("avg JCT", hours(summary.avg_jct_s)),
        ("p50 / p99 JCT", f"{hours(summary.p50_jct_s)} / {hours(summary.p99_jct_s)}"),
        ("avg queueing", hours(summary.avg_queueing_s)),
        ("makespan", hours(summary.makespan_s)),
        ("GPU utilization", f"{summary.utilization:.1%}"),
        ("fragmentation rate (time avg)", f"{summary.fragmentation_rate_mean:.1%}"),
        (
            "finish-time fairness rho (mean / max)",
            f"{number(summary.ftf_rho_mean)} / {number(summary.ftf_rho_max)}",
        ),
        (
            "slowdown (p99 / max)",
            f"{number(summary.slowdown_p99)} / {number(summary.slowdown_max)}",
        ),
        ("Jain's index (1 = equal slowdowns)", number(summary.jain_index)),
        ("energy", f"{summary.energy_kwh:,.1f} kWh"),
        ("simulation wall time", f"{summary.elapsed_s:.2f} s (the run, not start-up)"),
    ]
    if gandiva is not None:  # what Gandiva's mechanism did, so that a run shows it
        rows += [
            ("Gandiva: suspensions (time-slice hand-overs)", f"{gandiva.handovers:,}"),
            (
                "Gandiva: packs tried / kept / undone",
                f"{gandiva.packs_tried} / {gandiva.packs_kept} / {gandiva.packs_undone}",
            ),
            (
                "Gandiva: migrations (to defragment)",
                f"{gandiva.migrations} ({gandiva.defragmentations})",
            ),
        ]
    if estimation is not None:  # what the throughput estimation did
        error = estimation.estimate_error_median
        rows += [
            (
                "estimation: jobs profiled / profiling rounds",
                f"{estimation.profiled_jobs} / {estimation.profiling_rounds}",
            ),
            (
                "estimation: rates estimated / never measured",
                f"{estimation.estimated_entries} / {estimation.still_estimated}",
            ),
            (
                "estimation: median error of checked estimates",
                "-" if math.isnan(error) else f"{error:.1%} ({estimation.checked_estimates})",
            ),
        ]
    for name, value in rows:
        table.add_row(name, value)
    show(table, ("metric",))
