"""``gpumosaic fill``: one "fill the cluster" replay (FGD/PWR evaluation) of one placement."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from gpumosaic.cli.app import (
    MAX_INFLATE,
    app,
    check_number,
    check_out_dir,
    check_seed,
    user_errors,
)
from gpumosaic.cli.tables import show

if TYPE_CHECKING:
    from rich.console import Console

    from gpumosaic.mechanisms.fill.simulator import FillPoint, FillResult

TASKS_HELP = "openb:NAME (default, gpushare40, multigpu20, ...) or a task-list CSV"
NODES_HELP = "openb:gpu (1,213 GPU nodes), openb:all, or a node-list CSV"
PLACEMENT_HELP = (
    "random, dotprod, gpuclustering, gpupacking, bestfit, fgd, fgd-exact, pwr, firstfit, "
    "worstfit/strided, or weights like pwr=200,fgd=800"
)


def point_json(point: FillPoint) -> dict[str, float]:
    return {
        "arrived_pct": round(point.arrived_pct, 4),
        "allocation_rate_pct": round(point.allocation_rate_pct, 4),
        "fragmentation_rate_pct": round(point.fragmentation_rate_pct, 4),
        "fragmentation_pct": round(point.fragmentation_pct, 4),
        "power_w": round(point.power_w, 1),
        "power_gpu_w": round(point.power_gpu_w, 1),
        "power_cpu_w": round(point.power_cpu_w, 1),
    }


def result_json(result: FillResult, tasks: str, nodes: str) -> dict[str, Any]:
    """The one JSON object of ``gpumosaic fill --json`` (curve sampled every 1% arrived)."""
    failed = result.failed_by_reason()
    return {
        "placement": result.placement,
        "seed": result.seed,
        "inflate": result.inflate,
        "tasks": tasks,
        "nodes": nodes,
        "num_tasks": result.num_tasks,
        "curve": [point_json(result.point(int(i))) for i in result.sample_indices(1.0)],
        "final": point_json(result.final),
        "failed_tasks": {
            "count": int(result.failed.sum()),
            "by_reason": {reason.value: count for reason, count in failed},
            "by_kind": dict(result.failed_by_kind()),
        },
        "elapsed_s": round(result.elapsed_s, 3),
        "cpu_s": round(result.cpu_s, 3),
    }


def write_fill_outputs(result: FillResult, summary: dict[str, Any], out: Path) -> None:
    """Full per-task curve (CSV), the summary JSON and a plot."""
    import pandas as pd

    from gpumosaic.experiments.plots.fill import plot_fill_run  # matplotlib: only if asked

    out.mkdir(parents=True, exist_ok=True)
    frame = pd.DataFrame(
        {
            "task": range(result.num_tasks),
            "arrived_pct": result.arrived_pct,
            "allocation_rate_pct": result.allocation_rate_pct,
            "fragmentation_rate_pct": result.fragmentation_rate_pct,
            "fragmentation_pct": result.fragmentation_pct,
            "power_gpu_w": result.power_gpu_w,
            "power_cpu_w": result.power_cpu_w,
            "failed": result.failed,
        }
    )
    frame.to_csv(out / "curve.csv", index=False)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    scenario = f"tasks {summary['tasks']} on nodes {summary['nodes']}"
    plot_fill_run(result, out / "fill.png", scenario=scenario)


@app.command(
    epilog="Example: gpumosaic fill --tasks openb:default --nodes openb:gpu "
    "--placement fgd --seed 42 --inflate 1.3 --json"
)
@user_errors
def fill(
    tasks: Annotated[str, typer.Option(help=TASKS_HELP)] = "openb:default",
    nodes: Annotated[str, typer.Option(help=NODES_HELP)] = "openb:gpu",
    placement: Annotated[str, typer.Option(help=PLACEMENT_HELP)] = "fgd",
    seed: Annotated[int, typer.Option(help="seed of the shuffle, the inflation and ties")] = 42,
    inflate: Annotated[
        float, typer.Option(help="stop when requested GPUs reach this x cluster GPUs")
    ] = 1.3,
    out: Annotated[Path | None, typer.Option(help="folder for curve.csv, summary, plot")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """Fill the cluster with tasks that never leave (the FGD / PWR experiment).

    Records allocation, fragmentation and power against the arrived workload."""
    check_seed(seed)
    check_out_dir(out)
    check_number(inflate, "--inflate", above=0, at_most=MAX_INFLATE)
    from gpumosaic.placement.registry import check_placement_for

    check_placement_for(placement)  # the placement grammar: no scorer, no numpy
    from gpumosaic.traces.openb_files import resolve_openb

    resolve_openb(nodes, kind="nodes")  # the names (or paths) before the reader's numpy
    resolve_openb(tasks, kind="tasks")
    from gpumosaic.cli.progress import counter_bar
    from gpumosaic.run.fill import fill_replay
    from gpumosaic.traces.openb import load_openb_nodes, load_openb_tasks

    cluster = load_openb_nodes(nodes)
    jobs = load_openb_tasks(tasks)
    with counter_bar(not json_out and sys.stderr.isatty(), "filling", 100.0) as update:
        result = fill_replay(
            cluster, jobs, placement, seed, inflate, progress=lambda f: update(100.0 * f)
        )
    summary = result_json(result, tasks, nodes)
    if out is not None:
        from gpumosaic.cli.out_folder import locked_out

        with locked_out(out):  # one writer at a time (a second command: one line)
            write_fill_outputs(result, summary, out)
    if json_out:
        from gpumosaic.kernel_cache import kernels_ran

        summary = {**summary, "kernels": kernels_ran()}  # aot, jit, aot+jit or none
        sys.stdout.write(json.dumps(summary) + "\n")
        return
    from rich.console import Console

    print_summary(result, Console())


def print_summary(result: FillResult, console: Console) -> None:
    from rich.table import Table

    from gpumosaic.experiments.sweeps.fill import TABLE_POINTS_PCT

    table = Table(title=f"fill: {result.placement}, seed {result.seed}, {result.num_tasks} tasks")
    for column in ("arrived %", "allocation %", "frag. rate %", "frag. % of GPUs", "power kW"):
        table.add_column(column, justify="right")
    points = [result.at_arrived(p) for p in TABLE_POINTS_PCT if p < result.final.arrived_pct]
    shown: set[str] = set()
    for point in (*points, result.final):
        arrived = f"{point.arrived_pct:.1f}"
        if arrived in shown:  # the last point at 130.0 and the final at 130.04: one row
            continue
        shown.add(arrived)
        table.add_row(
            f"{point.arrived_pct:.1f}",
            f"{point.allocation_rate_pct:.2f}",
            f"{point.fragmentation_rate_pct:.1f}",
            f"{point.fragmentation_pct:.2f}",
            f"{point.power_w / 1000:.1f}",
        )
    show(table, (), console)
    failed = ", ".join(f"{r.value}: {c}" for r, c in result.failed_by_reason()) or "none"
    kinds = ", ".join(f"{k}: {c}" for k, c in result.failed_by_kind())
    if kinds:
        failed += f"; by kind {kinds}"
    console.print(f"failed tasks: {int(result.failed.sum())} ({failed}); {result.elapsed_s:.2f} s")
