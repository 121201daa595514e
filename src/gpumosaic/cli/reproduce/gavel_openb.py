"""``gpumosaic reproduce gavel-openb``: Gavel's max_min_fairness_perf at Alibaba scale, FGD vs
strided on the openb cluster (``experiments/reproductions/gavel_openb.py``)."""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from gpumosaic.cli.app import user_errors
from gpumosaic.cli.progress import counter_bar
from gpumosaic.cli.reproduce.gavel import _numbers
from gpumosaic.cli.reproduce.group import reproduce_app
from gpumosaic.cli.tables import show
from gpumosaic.errors import InputError
from gpumosaic.options import OptionError, convert

if TYPE_CHECKING:
    from gpumosaic.experiments.reproductions.gavel_openb import OpenbPoint, OpenbRun


@reproduce_app.command(
    "gavel-openb",
    epilog="Example: gpumosaic reproduce gavel-openb --rates 860 --window 4000-5000",
)
@user_errors
def gavel_openb(
    rates: Annotated[str, typer.Option(help="jobs/hr, comma-separated")] = "120,240",
    window: Annotated[str, typer.Option(help="measured job ids A-B")] = "100-130",
    placements: Annotated[str, typer.Option(help="placements, comma-separated")] = "strided,fgd",
    seed: Annotated[int, typer.Option(help="seed of the generated jobs")] = 0,
    seeds: Annotated[
        str | None,
        typer.Option(help="several seeds, e.g. 0-2 or 0,1,2 (replaces --seed): mean and range"),
    ] = None,
    workers: Annotated[int, typer.Option(help="parallel runs")] = 2,
    json_out: Annotated[
        bool, typer.Option("--json", help="print one JSON object: runs and total wall time")
    ] = False,
) -> None:
    """Gavel's policy on the openb cluster (6,212 GPUs): FGD vs strided.

    Avg JCT, utilization and fragmentation over the measured window (the reference
    window 4000-5000 at 860 jobs/h: ~25 s of CPU a run here)."""
    try:
        span = convert(tuple[int, int], window, "window")
    except OptionError:
        raise InputError(
            "expected a range A-B of job ids, e.g. 4000-5000", field="--window", value=window
        ) from None
    if not 0 <= span[0] < span[1]:
        raise InputError("the window A-B needs 0 <= A < B", field="--window", value=window)
    chosen = [p.strip() for p in placements.split(",") if p.strip()]
    if not chosen:
        raise InputError("give at least one placement", field="--placements", value=placements)
    from gpumosaic.placement.registry import check_placement_for

    for placement in chosen:  # the placement grammar, before the runs (no numpy)
        check_placement_for(placement, field="--placements")
    rate_list = _numbers(rates, float, "--rates")
    if not rate_list or any(not (r > 0 and math.isfinite(r)) for r in rate_list):
        raise InputError("rates must be positive numbers", field="--rates", value=rates)
    from gpumosaic.experiments.reproductions.gavel_openb import (  # only now
        run_openb_sweep,
        summarize_seeds,
    )
    from gpumosaic.experiments.sweeps.runs import parse_seeds

    seed_list = [seed]
    if seeds is not None:
        try:
            seed_list = parse_seeds(seeds)
        except ValueError as err:
            raise InputError(str(err), field="--seeds", value=seeds) from None
    started = time.perf_counter()
    with counter_bar(not json_out, "gavel on openb") as update:
        runs = run_openb_sweep(
            chosen,
            rate_list,
            span,
            seed_list,
            workers,
            lambda done, total, _run: update(done, total),
        )
    wall_s = round(time.perf_counter() - started, 1)
    points = summarize_seeds(runs)
    if json_out:
        payload = {
            "runs": [asdict(r) for r in runs],
            "points": [asdict(p) for p in points],
            "total_wall_s": wall_s,
        }
        print(json.dumps(payload, indent=1))
        return
    console = Console()
    show(_table(runs, span), ("placement",), console)
    if len(seed_list) > 1:
        console.print(_points_table(points, span))


def _table(runs: list[OpenbRun], window: tuple[int, int]) -> Table:
    table = Table(
        title=f"Gavel max_min_fairness_perf on openb, jobs {window[0]}-{window[1]} measured",
        box=box.SIMPLE,
    )
    names = (
        "placement",
        "jobs/hr",
        "seed",
        "avg JCT h",
        "done",
        "util",
        "frag",
        "rounds",
        "wall s",
    )
    for name in names:
        table.add_column(name, justify="left" if name == "placement" else "right")
    for r in runs:
        table.add_row(
            r.placement,
            f"{r.rate_per_hour:g}",
            str(r.seed),
            f"{r.avg_jct_h:.2f}",
            str(r.completed),
            f"{r.utilization:.1%}",
            f"{r.fragmentation_rate:.1%}",
            str(r.rounds),
            f"{r.elapsed_s:.0f}",
        )
    return table


def _points_table(points: list[OpenbPoint], window: tuple[int, int]) -> Table:
    """Mean over seeds with the range (min-max) beside it."""
    table = Table(
        title=f"over seeds: mean (min-max), jobs {window[0]}-{window[1]} measured",
        box=box.SIMPLE,
    )
    for name in ("placement", "jobs/hr", "seeds", "avg JCT h", "util", "frag", "failures"):
        table.add_column(name, justify="left" if name == "placement" else "right", no_wrap=True)

    def fmt(values: tuple[float, float, float], spec: str) -> str:
        mean, low, high = values
        return f"{mean:{spec}} ({low:{spec}}-{high:{spec}})"

    for p in points:
        table.add_row(
            p.placement,
            f"{p.rate_per_hour:g}",
            ",".join(str(s) for s in p.seeds),
            fmt(p.avg_jct_h, ".3f"),
            fmt(p.utilization, ".1%"),
            fmt(p.fragmentation_rate, ".1%"),
            fmt(p.placement_failures, ",.0f"),
        )
    return table
