"""Benchmark: one full default-trace fill replay per placement (not part of the tests).

    .venv/bin/python bench/bench_fill.py [--seed 42] [--placements fgd,pwr,...]

Prints wall and CPU seconds per run (CPU time is the stable number on a shared machine).
"""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from gpumosaic.run.fill import fill_replay
from gpumosaic.traces.openb import load_openb_nodes, load_openb_tasks

DEFAULT_PLACEMENTS = (
    "random,dotprod,gpuclustering,gpupacking,bestfit,fgd,fgd-exact,pwr,pwr=200,fgd=800"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--tasks", default="openb:default")
    parser.add_argument("--nodes", default="openb:gpu")
    parser.add_argument("--placements", default=DEFAULT_PLACEMENTS)
    args = parser.parse_args()
    nodes = load_openb_nodes(args.nodes)
    tasks = load_openb_tasks(args.tasks)
    # "pwr=200,fgd=800" contains a comma: split on names, keep weighted groups together.
    placements: list[str] = []
    for part in args.placements.split(","):
        if "=" in part and placements and "=" in placements[-1].split(",")[-1]:
            placements[-1] += "," + part
        else:
            placements.append(part)
    table = Table(title=f"fill replay, {args.tasks} on {args.nodes}, seed {args.seed}")
    for column in ("placement", "tasks", "wall s", "cpu s", "allocation % at end"):
        table.add_column(column, justify="right")
    for placement in placements:
        result = fill_replay(nodes, tasks, placement, args.seed)
        table.add_row(
            result.placement,
            str(result.num_tasks),
            f"{result.elapsed_s:.2f}",
            f"{result.cpu_s:.2f}",
            f"{result.final.allocation_rate_pct:.2f}",
        )
    Console().print(table)


if __name__ == "__main__":
    main()
