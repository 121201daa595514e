"""Every registered policy keeps the base constraints on random small inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from policy_builders import assert_feasible, make_input

from gpumosaic.policies.registry import POLICY_NAMES, build_policy

GAVEL_NAMES = {
    "fifo", "fifo_perf", "fifo_packed", "max_min_fairness", "max_min_fairness_perf",
    "max_min_fairness_packed", "max_min_fairness_water_filling",
    "max_min_fairness_water_filling_perf", "max_min_fairness_water_filling_packed",
    "finish_time_fairness", "finish_time_fairness_perf", "finish_time_fairness_packed",
    "max_sum_throughput_perf", "max_sum_throughput_normalized_by_cost_perf",
    "max_sum_throughput_normalized_by_cost_perf_SLOs",
    "max_sum_throughput_normalized_by_cost_packed_SLOs", "min_total_duration",
    "min_total_duration_perf", "min_total_duration_packed", "gandiva", "isolated",
}  # fmt: skip


def test_registry_has_gavels_names() -> None:
    assert set(POLICY_NAMES) >= GAVEL_NAMES
    assert {"tiresias", "las"} <= set(POLICY_NAMES)
    for name in POLICY_NAMES:
        assert build_policy(name).name == name


def test_registry_rejects_unknown_names_and_options() -> None:
    with pytest.raises(ValueError, match="unknown policy"):
        build_policy("max_min_fairness_perff")
    with pytest.raises(ValueError, match="bad option"):
        build_policy("max_min_fairness_perf", solver="ECOS")
    with pytest.raises(ValueError, match="fixes option"):
        build_policy("max_min_fairness_packed", use_pairs=False)


@st.composite
def small_inputs(draw: st.DrawFn):  # type: ignore[no-untyped-def]
    n = draw(st.integers(1, 5))
    t = draw(st.integers(1, 3))
    rate = st.one_of(st.just(0.0), st.floats(0.5, 10.0))
    thr = [[draw(rate) for _ in range(t)] for _ in range(n)]
    sf = [draw(st.sampled_from([1, 1, 2])) for _ in range(n)]
    demand = [s if s > 1 else draw(st.sampled_from([0.25, 0.5, 1.0])) for s in sf]
    capacity = [draw(st.sampled_from([0.5, 1.0, 2.0, 4.0])) for _ in range(t)]
    remaining = [draw(st.floats(1.0, 1e5)) for _ in range(n)]
    weights = [draw(st.sampled_from([0.5, 1.0, 2.0])) for _ in range(n)]
    arrival = [draw(st.floats(0.0, 100.0)) for _ in range(n)]
    attained = [draw(st.floats(0.0, 1e4)) for _ in range(n)]
    slo = [draw(st.one_of(st.just(float("nan")), st.floats(50.0, 1e5))) for _ in range(n)]
    entities = tuple(draw(st.sampled_from(["a", "b"])) for _ in range(n))
    candidates = [(a, b) for a in range(n) for b in range(a + 1, n)]
    pairs = (
        draw(st.lists(st.sampled_from(candidates), unique=True, max_size=4)) if candidates else []
    )
    pair_rates = [
        [
            (draw(st.floats(0.0, 1.0)) * thr[a][k], draw(st.floats(0.0, 1.0)) * thr[b][k])
            for k in range(t)
        ]
        for a, b in pairs
    ]
    return make_input(
        thr, capacity, scale_factors=sf, demand=demand, weights=weights, remaining=remaining,
        arrival=arrival, attained=attained, now=200.0, entities=entities,
        entity_weights=(("a", 1.0), ("b", 2.0)), slo=slo, cost=[1.0 + k for k in range(t)],
        gpu_types=tuple(f"g{k}" for k in range(t)), pairs=pairs, pair_rates=pair_rates,
    )  # fmt: skip


@pytest.mark.slow  # hypothesis examples through every policy's solver: seconds of CPU
@settings(max_examples=30, deadline=None)
@given(small_inputs())
def test_every_policy_keeps_the_base_constraints(inp) -> None:  # type: ignore[no-untyped-def]
    for name in POLICY_NAMES:
        alloc = build_policy(name).allocate(inp)
        assert alloc.job_ids == inp.job_ids
        assert_feasible(alloc, inp, tol=1e-6)
        assert np.isfinite(alloc.matrix).all()
