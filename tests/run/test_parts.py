"""The road's decision objects from names (``run/parts.py``): what ``serve`` and the
extender build is what a simulated run builds."""

from __future__ import annotations

import pytest

from gpumosaic.errors import InputError
from gpumosaic.mechanisms.rounds.sim import RoundConfig, RoundSimulator
from gpumosaic.run.build import build_parts
from gpumosaic.run.description import RunDescription
from gpumosaic.run.parts import build_placement_for, build_round_parts


def test_round_parts_draw_as_the_simulated_run_draws() -> None:
    description = RunDescription(
        cluster="v100:2,k80:2", workload="gavel:jobs=4,rate=0", policy="fifo",
        mechanism="rounds", placement="fgd", seed=7,
    )  # fmt: skip
    parts = build_parts(description)
    live = build_round_parts("fifo", "fgd", parts.target, 7, 360.0, 1920.0)
    sim = RoundSimulator(
        parts.cluster, parts.workload, parts.policy, parts.placement,  # type: ignore[arg-type]
        RoundConfig(), rng=parts.rng, target=parts.target,
    )  # fmt: skip
    assert type(live.policy) is type(parts.policy)
    assert type(live.placement) is type(parts.placement)
    assert live.config == RoundConfig(360.0, 1920.0)
    # The decider's type shuffle: the same stream in the live service and the simulator.
    assert (live.shuffle_rng.permutation(8) == sim.decider.shuffle_rng.permutation(8)).all()


def test_a_bad_name_is_one_input_error_naming_the_option() -> None:
    target = build_parts(RunDescription(cluster="v100:1", workload="gavel:jobs=1")).target
    with pytest.raises(InputError) as err:
        build_placement_for("tetris", target, field="--placements")
    assert err.value.field == "--placements"
    with pytest.raises(InputError) as err:
        build_round_parts("nope", "fgd", target, 0, 360.0, 0.0)
    assert err.value.field == "--policy"
