"""``gpumosaic compare --mode fill``: fill replays of several placements x seeds in
parallel, the paper's figures, a CSV of all curves and a table at 90/100/110/130% arrived.

The ``compare`` command (cli/compare/command.py) parses its options and calls ``compare_fill``.
"""

from __future__ import annotations

import importlib
import json
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from rich.console import Console
from rich.table import Table

from gpumosaic.cli.app import announce
from gpumosaic.cli.progress import counter_bar
from gpumosaic.cli.tables import show
from gpumosaic.errors import InputError
from gpumosaic.experiments.sweeps.fill import FillSummaryRow, summarize
from gpumosaic.mechanisms.fill.simulator import (
    CPU_ONLY_KIND,
    FAIL_REASONS,
    PLACED,
    FillResult,
    on_grid,
)
from gpumosaic.placement.workload import TargetWorkload
from gpumosaic.run.parts import build_placement_for
from gpumosaic.traces.openb import load_openb_nodes, load_openb_tasks

if TYPE_CHECKING:
    from gpumosaic.experiments.study.kinds.fill import FillPoint


def compare_fill(
    placements: list[str],
    seeds: list[int],
    tasks: str,
    nodes: str,
    inflate: float,
    out: Path,
    workers: int,
    as_json: bool,
) -> None:
    """Run every placement x seed, write figures and CSVs into ``out``, print the table."""
    if not placements or not seeds:
        raise InputError("need at least one placement and one seed", field="--placements")
    if not inflate > 0:
        raise InputError("must be > 0", field="--inflate")
    # Check every input here, in this process, so a typo fails fast with one clear line.
    load_openb_nodes(nodes)
    jobs = load_openb_tasks(tasks)
    workload = TargetWorkload.from_jobs(jobs)
    for placement in placements:
        build_placement_for(placement, workload, field="--placements")
    # This process waits while the workers run: load the figure and table libraries then
    # (matplotlib and pandas, ~1 s of CPU) instead of after the last run.
    warm = threading.Thread(target=_import_outputs, name="import-outputs", daemon=True)
    warm.start()
    start = time.perf_counter()
    _experiment_file(out, placements, seeds, tasks, nodes, inflate)
    results = _run_stored(out, workers, len(placements) * len(seeds))
    elapsed = time.perf_counter() - start
    warm.join()
    import pandas as pd

    from gpumosaic.experiments.plots.fill import plot_fill_comparison

    rows = summarize(results)
    out.mkdir(parents=True, exist_ok=True)
    figures = plot_fill_comparison(results, out, scenario=f"tasks {tasks} on nodes {nodes}")
    write_curves(results, out / "curves.csv")
    pd.DataFrame([asdict(r) for r in rows]).to_csv(out / "table.csv", index=False)
    if as_json:
        payload = {
            "table": [asdict(r) for r in rows],
            "runs": len(results),
            "run_elapsed_s": [round(r.elapsed_s, 3) for r in results],
            "run_cpu_s": [round(r.cpu_s, 3) for r in results],
            "elapsed_s": round(elapsed, 3),
            "out": str(out),
            "figures": [str(f) for f in figures],
        }
        sys.stdout.write(json.dumps(payload) + "\n")
        return
    print_table(rows, Console())
    Console().print(f"{len(results)} runs in {elapsed:.1f} s; figures and CSVs in {out}")


def _import_outputs() -> None:
    try:
        for module in ("pandas", "gpumosaic.experiments.plots.fill"):
            importlib.import_module(module)
    except ImportError:
        return  # raised again, with its message, where the module is used


def write_curves(results: list[FillResult], path: Path) -> None:
    """Every run's curve on a common grid of arrived workload (every 1%)."""
    import pandas as pd

    from gpumosaic.experiments.plots.fill import arrived_grid

    grid = arrived_grid(results)
    frames = []
    for r in results:
        idx = on_grid(r, grid)
        frames.append(
            pd.DataFrame(
                {
                    "placement": r.placement,
                    "seed": r.seed,
                    "arrived_pct": np.round(grid, 3),
                    "allocation_rate_pct": r.allocation_rate_pct[idx],
                    "fragmentation_rate_pct": r.fragmentation_rate_pct[idx],
                    "fragmentation_pct": r.fragmentation_pct[idx],
                    "power_gpu_w": r.power_gpu_w[idx],
                    "power_cpu_w": r.power_cpu_w[idx],
                    "power_w": r.power_w[idx],
                }
            )
        )
    pd.concat(frames, ignore_index=True).to_csv(path, index=False)


def print_table(rows: list[FillSummaryRow], console: Console) -> None:
    table = Table(title="fill replay: mean ± sd over seeds")
    for column in ("placement", "arrived %", "allocation %", "frag. rate %", "power kW"):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            r.placement,
            f"{r.arrived_pct:.0f}",
            f"{r.allocation_rate_mean:.2f} ± {r.allocation_rate_sd:.2f}",
            f"{r.fragmentation_rate_mean:.1f} ± {r.fragmentation_rate_sd:.1f}",
            f"{r.power_w_mean / 1000:.1f} ± {r.power_w_sd / 1000:.1f}",
        )
    show(table, ("placement",), console)


def _experiment_file(
    out: Path, placements: list[str], seeds: list[int], tasks: str, nodes: str, inflate: float
) -> None:
    """``OUT/experiment.toml``, as the compare command writes it, when a caller of
    ``compare_fill`` did not (the command writes it before it calls)."""
    from gpumosaic.experiments.study.compare_file import COMPARE_FILE, write_compare_experiment

    if (out / COMPARE_FILE).is_file():
        return
    out.mkdir(parents=True, exist_ok=True)
    write_compare_experiment(
        out, mode="fill", placements=placements, policies=None, seeds=seeds, cluster="",
        workload="", policy="", rates=[], tasks=tasks, nodes=nodes, inflate=inflate,
        gpus_per_node=1, backfill=True, sharing=["none"], mechanism="auto",
    )  # fmt: skip


def _run_stored(out: Path, workers: int, planned: int) -> list[FillResult]:
    """The replays of ``OUT/experiment.toml`` through the study executor, as ``gpumosaic
    run`` runs them: each stored in OUT's result store as it ends (docs/experiments.md),
    the stored ones reused (a line says how many), Ctrl-C answered with what is stored;
    read back in the file's order (placements x seeds)."""
    from gpumosaic.experiments.study.compare_file import COMPARE_FILE
    from gpumosaic.experiments.study.execute import execute
    from gpumosaic.experiments.study.file import load_experiment

    study = load_experiment(out / COMPARE_FILE)
    with counter_bar(sys.stderr.isatty(), "fill runs", planned) as update:
        outcome = execute(
            study, out, "local", workers, lambda done, _total: update(done), announce=announce
        )
    if outcome.failed:
        raise InputError(f"run(s) failed: {outcome.failed[0].error}")
    return [stored_fill(out, run.run_id, run.point) for run in study.runs()]


def stored_fill(out: Path, run_id: str, point: FillPoint) -> FillResult:
    """One stored fill replay as the ``FillResult`` its run returned (curves, per-task
    fail reasons and kinds, times), from its timeline, jobs and row."""
    from gpumosaic.experiments.results.store import ROW_FILE, read_table, run_folder

    folder = run_folder(out, run_id)
    row = json.loads((folder / ROW_FILE).read_text())
    description = json.loads((folder / "run.json").read_text())
    curve = read_table(out, run_id, "timeline")
    jobs = read_table(out, run_id, "jobs")
    assert curve is not None and jobs is not None, run_id

    def floats(name: str) -> np.ndarray:
        return np.asarray(curve.column(name).to_numpy(), dtype=np.float64)

    code = {reason.value: i for i, reason in enumerate(FAIL_REASONS)}
    reasons = [code.get(r, PLACED) if r else PLACED for r in jobs.column("reason").to_pylist()]
    kinds = [_kind(label) for label in jobs.column("kind").to_pylist()]
    return FillResult(
        placement=point.placement,
        seed=point.seed,
        inflate=point.inflate,
        cluster_gpu_milli=int(description["cluster_gpus"]) * 1000,
        arrived_pct=floats("arrived_pct"),
        allocation_rate_pct=floats("allocation_rate_pct"),
        fragmentation_rate_pct=floats("fragmentation_rate_pct"),
        fragmentation_pct=floats("fragmentation_pct"),
        power_gpu_w=floats("power_gpu_w"),
        power_cpu_w=floats("power_cpu_w"),
        fail_reason=np.asarray(reasons, dtype=np.int8),
        task_kind=np.asarray(kinds, dtype=np.int8),
        elapsed_s=float(row.get("elapsed_s") or 0.0),
        cpu_s=float(row.get("cpu_s") or 0.0),
    )


def _kind(label: str) -> int:
    """The inverse of ``kind_label``: cpu-only -1, sharing 0, k-gpu k."""
    if label == "cpu-only":
        return CPU_ONLY_KIND
    return 0 if label == "sharing" else int(label.removesuffix("-gpu"))
