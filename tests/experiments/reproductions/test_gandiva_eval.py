"""The Gandiva evaluation runs end to end on a tiny burst (the real sizes are in the module)."""

from __future__ import annotations

import pytest

from gpumosaic.experiments.reproductions.gandiva import VARIANTS, Scenario, evaluate, packing_gains


def test_tiny_evaluation_has_a_row_per_variant_and_a_packing_gain() -> None:
    tiny = Scenario("tiny", (("v100", 4),), 4, 4.0, False, (0, 12), 12)
    rows = evaluate([tiny], VARIANTS)
    assert [r.variant for r in rows] == [v.name for v in VARIANTS]
    assert all(r.measured_done == 12 for r in rows)
    no_packing = [r for r in rows if "packing" not in r.variant]
    assert [r.work_per_busy for r in no_packing] == pytest.approx(
        [1.0] * len(no_packing)
    )  # nothing is ever packed
    assert all(0.0 < r.busy <= 1.0 for r in rows)
    [gain] = packing_gains(rows)
    assert gain.scenario == "tiny"
