"""``gpumosaic sim-vs-live --mechanism gandiva``: printing Gandiva's comparison
(``experiments/sim_vs_live/gandiva.py``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from gpumosaic.cli.sim_vs_live.table import print_agreement
from gpumosaic.experiments.sim_vs_live.inputs import SimVsLiveOptions


def run_gandiva(
    options: SimVsLiveOptions,
    mechanism: str,
    out: Path | None,
    json_out: bool,
    say: Callable[[str], None],
) -> None:
    from gpumosaic.experiments.sim_vs_live.agreement import write_outputs
    from gpumosaic.experiments.sim_vs_live.gandiva import compare_gandiva

    comparison = compare_gandiva(options, mechanism, say=say)
    if out is not None:
        for path in write_outputs(comparison, out, options.scenario(mechanism)):
            say(f"wrote {path}")
    if json_out:
        print(json.dumps(comparison.to_json(), indent=2, allow_nan=False))
        return
    c = comparison
    print_agreement(
        "Gandiva: sim vs live",
        c,
        [
            (name, str(getattr(c.sim_counts, name)), str(getattr(c.live_counts, name)), "")
            for name in ("suspensions", "migrations", "packs")
        ],
        f"simulated with the live costs: start {c.start.simulated_s:,.1f} s, switch "
        f"{c.switch.simulated_s:,.1f} s, migration {c.migration.simulated_s:,.1f} s (job time)",
    )
