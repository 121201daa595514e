"""``gpumosaic reproduce gavel static|continuous``: Gavel's simulator experiments, ours
beside the reference numbers (``experiments/reproductions/gavel.py``)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.table import Table

from gpumosaic.cli.app import user_errors
from gpumosaic.cli.progress import counter_bar
from gpumosaic.cli.reproduce.group import reproduce_app
from gpumosaic.cli.tables import show
from gpumosaic.errors import InputError

if TYPE_CHECKING:
    from gpumosaic.experiments.reproductions.gavel import ReproRow


def _numbers(text: str, kind: type, field: str) -> list:
    try:
        return [kind(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise InputError(f"expected comma-separated numbers, got {text!r}", field=field) from None


@reproduce_app.command(
    "gavel",
    epilog="Example: gpumosaic reproduce gavel static --policies "
    "max_min_fairness_perf,finish_time_fairness",
)
@user_errors
def gavel(
    part: Annotated[str, typer.Argument(help="static (minimize_makespan.trace) or continuous")],
    policies: Annotated[
        str, typer.Option(help="comma-separated policy names (default: the reference's)")
    ] = "",
    rates: Annotated[str, typer.Option(help="jobs/hr for the continuous part")] = "3.0,4.8",
    seeds: Annotated[str, typer.Option(help="seeds for the continuous part")] = "0,1,2",
    jobs_source: Annotated[
        str, typer.Option(help="gavel: Gavel's own job stream; gpumosaic: our generator")
    ] = "gavel",
    placement: Annotated[str, typer.Option(help="placement strategy")] = "strided",
    workers: Annotated[int, typer.Option(help="parallel runs")] = 2,
    json_out: Annotated[
        bool, typer.Option("--json", help='print one JSON object, {"rows": [...]}')
    ] = False,
) -> None:
    """Gavel's experiments (docs/gavel.md has the setups and the reference numbers): avg JCT
    and makespan per policy, ours beside Gavel's."""
    from gpumosaic.experiments.reproductions.gavel_request import check_request
    from gpumosaic.placement.registry import check_placement_for

    names = [p.strip() for p in policies.split(",") if p.strip()]
    # The request and the placement grammar, before the runs (no numpy).
    check_request(part.strip().lower(), names, jobs_source)
    check_placement_for(placement)
    rate_values = _numbers(rates, float, "--rates")
    seed_values = _numbers(seeds, int, "--seeds")
    from gpumosaic.experiments.reproductions.gavel import run_part  # the simulator: only now

    with counter_bar(True, f"gavel {part}") as update:
        rows = run_part(
            part.strip().lower(),
            names,
            rate_values,
            seed_values,
            jobs_source,
            placement,
            workers,
            on_done=update,
        )
    if json_out:
        kernels = sorted({r.kernels for r in rows})  # what ran them: aot, jit, aot+jit
        print(json.dumps({"rows": [asdict(r) for r in rows], "kernels": kernels}, indent=1))
        return
    show(_table(rows), ("policy",))


def _table(rows: list[ReproRow]) -> Table:
    continuous = any(r.experiment == "continuous" for r in rows)
    table = Table(
        title="Gavel's experiments: ours beside the reference",
        box=box.SIMPLE,
        pad_edge=False,
        collapse_padding=True,
    )
    table.add_column("policy", no_wrap=True)
    # Continuous runs have no reference makespan: their columns give way to rate and seed.
    names = ("jobs/hr", "seed") if continuous else ()
    tail = ("CPU s",) if continuous else ("mksp h", "ref", "err")
    for name in (*names, "JCT h", "ref", "err", *tail):
        table.add_column(name, justify="right", no_wrap=True)
    for r in rows:
        lead = (f"{r.rate_per_hour:g}", str(r.seed)) if continuous else ()
        rest = (
            (f"{r.cpu_s:.1f}",)
            if continuous
            else (f"{r.makespan_h:.2f}", _number(r.reference_makespan_h), _error(r.makespan_error))
        )
        table.add_row(
            r.policy,
            *lead,
            f"{r.avg_jct_h:.2f}",
            _number(r.reference_jct_h),
            _error(r.jct_error),
            *rest,
        )
    return table


def _number(value: float) -> str:
    return "" if math.isnan(value) else f"{value:.2f}"


def _error(error: float) -> str:
    return "" if math.isnan(error) else f"{100 * error:+.1f}%"
