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

import numpy as np
from rich.console import Console
from rich.table import Table

from gpumosaic.cli.app import announce
from gpumosaic.cli.progress import counter_bar
from gpumosaic.cli.tables import show
from gpumosaic.errors import InputError
from gpumosaic.experiments.sweeps.fill import (
    FillRunSpec,
    FillSummaryRow,
    run_fill_sweep,
    summarize,
)
from gpumosaic.mechanisms.fill.simulator import FillResult, on_grid
from gpumosaic.placement.workload import TargetWorkload
from gpumosaic.run.parts import build_placement_for
from gpumosaic.traces.openb import load_openb_nodes, load_openb_tasks


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
    specs = [FillRunSpec(p, s, tasks, nodes, inflate) for p in placements for s in seeds]
    # This process waits while the workers run: load the figure and table libraries then
    # (matplotlib and pandas, ~1 s of CPU) instead of after the last run.
    warm = threading.Thread(target=_import_outputs, name="import-outputs", daemon=True)
    warm.start()
    start = time.perf_counter()
    done = 0
    from gpumosaic.experiments.kept import KeptRuns

    kept = KeptRuns(out, (tasks, nodes), announce)  # each run stored as it ends: a rerun resumes
    with counter_bar(sys.stderr.isatty(), "fill runs", len(specs)) as update:

        def advance(_: FillResult) -> None:
            nonlocal done
            done += 1
            update(done)

        results = run_fill_sweep(specs, workers=workers, on_done=advance, kept=kept)
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
