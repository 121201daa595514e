"""The comparison's table, the same for every mechanism's sim-vs-live."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpumosaic.cli.tables import show

if TYPE_CHECKING:
    from gpumosaic.experiments.sim_vs_live.agreement import Agreement


def print_agreement(
    title: str, c: Agreement, rows: Sequence[tuple[str, str, str, str]], line: str
) -> None:
    """The comparison's table (both sides' jobs completed, average JCT and makespan, and
    ``rows``), then ``line``."""
    from rich.table import Table

    table = Table(title=f"{title} (time scale {c.time_scale:.4g}, live wall {c.wall_s:.0f} s)")
    table.add_column("")
    table.add_column("simulator", justify="right")
    table.add_column("live", justify="right")
    table.add_column("live - sim", justify="right")
    table.add_row("completed", str(c.sim.completed), str(c.live.completed), "")
    table.add_row(
        "avg JCT (s)", _fmt(c.sim.avg_jct_s), _fmt(c.live.avg_jct_s), _pct(c.avg_jct_rel_diff)
    )
    table.add_row(
        "makespan (s)", _fmt(c.sim.makespan_s), _fmt(c.live.makespan_s), _pct(c.makespan_rel_diff)
    )
    for row in rows:
        table.add_row(*row)
    show(table, ("",))
    print(
        f"per-job |live - sim| / sim: median {_pct(c.per_job_quantile(0.5))}, "
        f"p90 {_pct(c.per_job_quantile(0.9))}; {line}"
    )


def _fmt(x: float, unit: str = "") -> str:
    return "-" if math.isnan(x) else f"{x:,.1f}{unit}"


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{100 * x:+.2f}%"
