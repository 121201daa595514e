"""``gpumosaic sim-vs-live --mechanism gandiva``: printing Gandiva's comparison
(``experiments/sim_vs_live_gandiva.py``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from gpumosaic.cli.sim_vs_live import _fmt, _pct
from gpumosaic.experiments.sim_vs_live import SimVsLiveOptions


def run_gandiva(
    options: SimVsLiveOptions,
    mechanism: str,
    out: Path | None,
    json_out: bool,
    say: Callable[[str], None],
) -> None:
    from gpumosaic.experiments.sim_vs_live import write_outputs
    from gpumosaic.experiments.sim_vs_live_gandiva import compare_gandiva

    comparison = compare_gandiva(options, mechanism, say=say)
    if out is not None:
        for path in write_outputs(comparison, out):
            say(f"wrote {path}")
    if json_out:
        print(json.dumps(comparison.to_json(), indent=2, allow_nan=False))
        return
    from rich.console import Console
    from rich.table import Table

    c = comparison
    table = Table(
        title=f"Gandiva: sim vs live (time scale {c.time_scale:.4g}, live wall {c.wall_s:.0f} s)"
    )
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
    for name in ("suspensions", "migrations", "packs"):
        table.add_row(name, str(getattr(c.sim_counts, name)), str(getattr(c.live_counts, name)), "")
    Console().print(table)
    print(
        f"per-job |live - sim| / sim: median {_pct(c.per_job_quantile(0.5))}, "
        f"p90 {_pct(c.per_job_quantile(0.9))}; simulated with the live costs: start "
        f"{c.start.simulated_s:,.1f} s, switch {c.switch.simulated_s:,.1f} s, migration "
        f"{c.migration.simulated_s:,.1f} s (job time)"
    )
