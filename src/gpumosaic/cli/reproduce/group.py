"""``gpumosaic reproduce EXPERIMENT``: rerun a published measurement with our models."""

from __future__ import annotations

import json
import math
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from gpumosaic.cli.app import WrappingGroup, app, user_errors
from gpumosaic.cli.tables import show
from gpumosaic.errors import InputError
from gpumosaic.experiments.reproductions.nvshare import (
    JOBS,
    REFERENCE_TQS,
    ReproRow,
    ordering_checks,
    reproduce_nvshare,
)
from gpumosaic.sharing.gpu_phase import GPU_PHASE_BUSY
from gpumosaic.sharing.lock import HANDOVER_SYNC_S
from gpumosaic.sharing.paging import PagingModel

reproduce_app = typer.Typer(
    rich_markup_mode=None,  # as the top-level app: help that wraps at 80 columns
    cls=WrappingGroup,
    help="Reproduce published measurements and print ours beside theirs.",
    no_args_is_help=True,
)
app.add_typer(reproduce_app, name="reproduce")

# The model's defaults, from the light modules that define them (NvshareModel's own
# defaults; importing the model would load numpy for every ``reproduce`` mistake).
_PAGING = PagingModel()


def parse_tqs(text: str) -> tuple[float, ...]:
    """``"1000,60,30"`` -> (1000.0, 60.0, 30.0); every TQ must be a positive number."""
    values: list[float] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            value = float(item)
        except ValueError:
            raise InputError(f"TQ {item!r} is not a number", field="--tq") from None
        if not (value > 0 and math.isfinite(value)):
            raise InputError(f"TQ must be a positive number of seconds, got {item}", field="--tq")
        values.append(value)
    if not values:
        raise InputError("give at least one TQ, e.g. --tq 1000,60,30", field="--tq")
    return tuple(dict.fromkeys(values))


@reproduce_app.command(
    "nvshare", epilog="Example: gpumosaic reproduce nvshare --tq 1000,60,30 --json"
)
@user_errors
def nvshare(
    tq: Annotated[
        str, typer.Option(help="time quanta in seconds for the anti-thrashing rows")
    ] = ",".join(f"{t:g}" for t in REFERENCE_TQS),
    json_out: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
    link_gb_s: Annotated[
        float, typer.Option(help="host-GPU link bandwidth for write-backs, GB/s")
    ] = _PAGING.link_gb_s,
    fault_gb_s: Annotated[
        float, typer.Option(help="demand-paging (page fault) bandwidth, GB/s")
    ] = _PAGING.fault_gb_s,
    sweep_s: Annotated[
        float, typer.Option(help="GPU seconds between re-touches of the working set")
    ] = _PAGING.sweep_s,
    prefetch_threshold: Annotated[
        float, typer.Option(help="share of a refill that faults before UVM prefetch copies")
    ] = _PAGING.prefetch_threshold,
    handover_s: Annotated[
        float, typer.Option(help="fixed sync cost of a lock hand-over, s")
    ] = HANDOVER_SYNC_S,
    gpu_busy: Annotated[
        float, typer.Option(help="share of a GPU phase the GPU is busy")
    ] = GPU_PHASE_BUSY,
) -> None:
    """nvshare thesis Table 12.2: two identical jobs on one P100 (serial, off, on per TQ)."""
    tqs = parse_tqs(tq)
    from gpumosaic.sharing.nvshare import NvshareModel

    try:
        model = NvshareModel(
            paging=PagingModel(
                link_gb_s=link_gb_s,
                fault_gb_s=fault_gb_s,
                sweep_s=sweep_s,
                prefetch_threshold=prefetch_threshold,
            ),
            handover_s=handover_s,
            gpu_busy=gpu_busy,
        )
    except ValueError as err:
        raise InputError(str(err)) from None
    rows = reproduce_nvshare(tqs, model)
    checks = ordering_checks(rows)
    if json_out:
        payload = {
            "experiment": "nvshare",
            "gpu": "P100",
            "parameters": {
                "link_gb_s": model.paging.link_gb_s,
                "fault_gb_s": model.paging.fault_gb_s,
                "sweep_s": model.paging.sweep_s,
                "prefetch_threshold": model.paging.prefetch_threshold,
                "handover_s": model.handover_s,
                "idle_release_s": model.idle_release_s,
                "gpu_busy": model.gpu_busy,
            },
            "table": [r.as_dict() for r in rows],
            "orderings": [
                {
                    "job": c.job,
                    "question": c.question,
                    "ours": c.ours,
                    "reference": c.reference,
                    "agrees": c.agrees,
                }
                for c in checks
            ],
        }
        typer.echo(json.dumps(payload))
        return
    console = Console()
    show(_table(rows, tqs), (), console)
    errors = [abs(r.error_pct) for r in rows if r.error_pct is not None and r.setup != "serial"]
    if errors:
        console.print(
            f"max |error| over {len(errors)} modelled reference cells: {max(errors):.1f}% "
            f"(serial rows are the calibration)"
        )
    disagree = [c for c in checks if not c.agrees]
    console.print(
        f"orderings: {len(checks) - len(disagree)}/{len(checks)} agree"
        + "".join(
            f"\n  {c.job}: {c.question}: ours {c.ours}, reference {c.reference}" for c in disagree
        )
    )


def _table(rows: tuple[ReproRow, ...], tqs: tuple[float, ...]) -> Table:
    """One line per cell: ours beside the measurement, so any TQ fits in 80 columns."""
    table = Table(title="nvshare, two identical jobs on a P100-16GB: total time of both, s")
    for name, justify in (
        ("job", "left"),
        ("setup", "left"),
        ("TQ s", "right"),
        ("ours", "right"),
        ("reference", "right"),
        ("error", "right"),
        ("hand-overs", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    order = {"serial": 0, "off": 1, "on": 2}
    tq_rank = {t: i for i, t in enumerate(tqs)}
    for r in sorted(
        rows, key=lambda r: (JOBS.index(r.job), order[r.setup], tq_rank.get(r.tq_s or 0.0, -1))
    ):
        if r.error_pct is None:
            error = ""
        elif r.setup == "serial":
            error = "calibration"
        else:
            color = "green" if abs(r.error_pct) <= 15 else "red"
            error = f"[{color}]{r.error_pct:+.1f}%[/{color}]"
        table.add_row(
            r.job,
            r.setup,
            "" if r.tq_s is None else f"{r.tq_s:g}",
            f"{r.total_s:,.0f}",
            "" if r.reference_s is None else f"{r.reference_s:,.0f}",
            error,
            str(r.handovers),
        )
    return table
