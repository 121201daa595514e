"""Space sharing: pairs in the LP, including multi-GPU jobs of equal scale factor."""

from __future__ import annotations

import numpy as np
import pytest
from policy_builders import assert_feasible, job_time, make_input

from gpumosaic.policies.packing_pairs import build_packed_pairs
from gpumosaic.policies.registry import build_policy
from gpumosaic.workloads.throughputs import GavelThroughputTable


def test_packing_a_good_pair_beats_time_sharing() -> None:
    # One GPU, two jobs at 1 step/s alone, 0.8 each when packed (prop = 1).
    # Time sharing: 0.5 each. Packed all the time: 0.8 each. Objective 0.8.
    inp = make_input([[1.0], [1.0]], [1.0], pairs=[(0, 1)], pair_rates=[[(0.8, 0.8)]])
    alloc = build_policy("max_min_fairness_packed").allocate(inp)
    assert_feasible(alloc, inp)
    assert alloc.objective == pytest.approx(0.8, abs=1e-6)
    assert alloc.pair_matrix is not None
    assert alloc.pair_matrix[0, 0] == pytest.approx(1.0, abs=1e-6)


def test_multi_gpu_pair_with_equal_scale_factors() -> None:
    # Two 2-GPU jobs on 2 GPUs. Objective per job: sf * rate / prop = 2 * 0.8 * y = 1.6
    # when packed (the pair occupies 2 GPUs, 2 y <= 2); time sharing would give 2 * 0.5.
    inp = make_input(
        [[1.0], [1.0]], [2.0], scale_factors=[2, 2], pairs=[(0, 1)], pair_rates=[[(0.8, 0.8)]]
    )
    alloc = build_policy("max_min_fairness_packed").allocate(inp)
    assert_feasible(alloc, inp)
    assert alloc.objective == pytest.approx(1.6, abs=1e-6)


def test_pair_with_unequal_scale_factors_is_never_used() -> None:
    # sf 1 and 2: Y = 0; min(x0, 2 x1) with x0 + 2 x1 <= 2 -> x0 = 1, x1 = 1/2: 1.0.
    inp = make_input(
        [[1.0], [1.0]], [2.0], scale_factors=[1, 2], pairs=[(0, 1)], pair_rates=[[(0.9, 0.9)]]
    )
    alloc = build_policy("max_min_fairness_packed").allocate(inp)
    assert_feasible(alloc, inp)
    assert alloc.pair_matrix is not None and alloc.pair_matrix.max() <= 1e-9
    assert alloc.objective == pytest.approx(1.0, abs=1e-6)


def test_packed_without_pairs_equals_perf() -> None:
    inp = make_input([[2.0, 1.0], [4.0, 1.0]], [1.0, 1.0], gpu_types=("v100", "k80"))
    perf = build_policy("max_min_fairness_perf").allocate(inp)
    packed = build_policy("max_min_fairness_packed").allocate(inp)
    assert packed.objective == pytest.approx(perf.objective, abs=1e-6)


def test_candidate_pairs_top_k_and_multi_gpu() -> None:
    table = GavelThroughputTable.load()
    keys = [
        ("ResNet-18 (batch size 32)", 1),
        ("LM (batch size 20)", 1),
        ("Transformer (batch size 64)", 1),
        ("ResNet-18 (batch size 32)", 4),
        ("LM (batch size 20)", 4),
        ("Transformer (batch size 64)", 2),
    ]
    pairs = build_packed_pairs(keys, table, ("v100", "p100", "k80"), top_k=2)
    assert len(pairs.pairs) > 0
    a, b = pairs.pairs[:, 0], pairs.pairs[:, 1]
    assert (a < b).all()
    sf = np.array([k[1] for k in keys])
    assert (sf[a] == sf[b]).all()  # only equal scale factors pair up
    assert any(sf[a] == 4)  # the two 4-GPU jobs pair, from scaled single-GPU measurements
    # Each job appears as a chooser at most top_k times, so at most n * k pairs.
    assert len(pairs.pairs) <= len(keys) * 2
    # The 4-GPU pair's rates are the isolated 4-GPU rates scaled by the 1-GPU slowdown.
    k = int(np.flatnonzero(sf[a] == 4)[0])
    one = table.packed("ResNet-18 (batch size 32)", 1, "LM (batch size 20)", 1, "v100")
    assert one is not None
    expected = (
        table.isolated("ResNet-18 (batch size 32)", 4, "v100")
        * one[0]
        / table.isolated("ResNet-18 (batch size 32)", 1, "v100")
    )
    assert pairs.throughputs[k, 0, 0] == pytest.approx(expected)


def test_packed_policies_run_on_a_mixed_scale_factor_trace() -> None:
    from gpumosaic.policies.synthetic import gavel_policy_input

    inp = gavel_policy_input(40, np.random.default_rng(3), multi_gpu=True, with_pairs=True)
    for name in (
        "max_min_fairness_packed",
        "finish_time_fairness_packed",
        "min_total_duration_packed",
    ):
        alloc = build_policy(name).allocate(inp)
        assert_feasible(alloc, inp)
        assert job_time(alloc).max() <= 1 + 1e-6
