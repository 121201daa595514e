"""FIFO, throughput, makespan, Gandiva, isolated and Tiresias on hand-checkable cases."""

from __future__ import annotations

import numpy as np
import pytest
from policy_builders import assert_feasible, make_input

from gpumosaic.policies.registry import build_policy
from gpumosaic.policies.tiresias import las_queues

TWO_TYPES = ("v100", "k80")


def test_fifo_perf_takes_arrival_order_and_fastest_type() -> None:
    # Job 0 (first) takes the v100 (3 > 1), job 1 the remaining k80, job 2 waits.
    inp = make_input(
        [[3.0, 1.0], [1.0, 1.0], [2.0, 1.0]], [1.0, 1.0], arrival=[0, 1, 2], gpu_types=TWO_TYPES
    )
    alloc = build_policy("fifo_perf").allocate(inp)
    assert_feasible(alloc, inp)
    assert alloc.matrix.tolist() == [[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]


def test_fifo_blocks_behind_a_job_that_does_not_fit() -> None:
    # Job 0 needs 2 GPUs and only 1 exists: nobody behind it may jump ahead.
    inp = make_input([[1.0], [1.0]], [1.0], scale_factors=[2, 1], arrival=[0, 1])
    assert build_policy("fifo_perf").allocate(inp).matrix.sum() == 0.0


def test_fifo_fractional_jobs_share_a_gpu() -> None:
    # Three 500-milli jobs, one GPU: the first two run, the third waits.
    inp = make_input([[1.0], [1.0], [1.0]], [1.0], demand=[0.5, 0.5, 0.5], arrival=[0, 1, 2])
    alloc = build_policy("fifo").allocate(inp)
    assert_feasible(alloc, inp)
    assert alloc.matrix[:, 0].tolist() == [1.0, 1.0, 0.0]


def test_fifo_base_keeps_a_running_job_on_its_type() -> None:
    policy = build_policy("fifo", seed=7)
    inp = make_input([[1.0, 1.0], [1.0, 1.0]], [1.0, 1.0], arrival=[0, 1], gpu_types=TWO_TYPES)
    first = policy.allocate(inp).matrix.copy()
    again = policy.allocate(inp).matrix
    assert (first == again).all()


def test_fifo_packed_packs_a_queued_job_with_a_good_partner() -> None:
    # As in the perf test, then job 2 packs with job 1 on the k80: normalized packed
    # throughput 0.9 / 1 + 0.8 / 1 = 1.7 > 1.5, so pair (1, 2) runs there, job 1's
    # single row moves into the pair.
    inp = make_input(
        [[3.0, 1.0], [1.0, 1.0], [2.0, 1.0]],
        [1.0, 1.0],
        arrival=[0, 1, 2],
        gpu_types=TWO_TYPES,
        pairs=[(1, 2)],
        pair_rates=[[(0.5, 0.5), (0.9, 0.8)]],
    )
    alloc = build_policy("fifo_packed").allocate(inp)
    assert_feasible(alloc, inp)
    assert alloc.pair_matrix is not None
    assert alloc.pair_matrix.tolist() == [[0.0, 1.0]]
    assert alloc.matrix.tolist() == [[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]]


def test_max_sum_throughput() -> None:
    # Job 0 on the v100 (3) and job 1 on the k80 (1): 4 beats 2 + 1 = 3.
    inp = make_input([[3.0, 1.0], [2.0, 1.0]], [1.0, 1.0], gpu_types=TWO_TYPES)
    alloc = build_policy("max_sum_throughput_perf").allocate(inp)
    assert_feasible(alloc, inp)
    assert alloc.objective == pytest.approx(4.0, abs=1e-6)


def test_throughput_per_dollar_with_gavel_prices() -> None:
    # Per dollar: job 0 v100 3/2.48 + job 1 k80 1/0.45 = 1.2097 + 2.2222 = 3.4319
    # beats job 1 v100 2/2.48 + job 0 k80 1/0.45 = 0.8065 + 2.2222 = 3.0287.
    inp = make_input([[3.0, 1.0], [2.0, 1.0]], [1.0, 1.0], gpu_types=TWO_TYPES)
    alloc = build_policy("max_sum_throughput_normalized_by_cost_perf").allocate(inp)
    assert alloc.objective == pytest.approx(3 / 2.48 + 1 / 0.45, abs=1e-5)


def test_slo_forces_the_costlier_choice_and_infeasible_slo_falls_back() -> None:
    # Job 1 must finish 1000 steps in 500 s: 2 steps/s, only its full v100 gives that.
    # Objective 2/2.48 + 1/0.45 = 3.0287.
    inp = make_input(
        [[3.0, 1.0], [2.0, 1.0]],
        [1.0, 1.0],
        gpu_types=TWO_TYPES,
        remaining=[1000, 1000],
        slo=[np.nan, 500.0],
    )
    name = "max_sum_throughput_normalized_by_cost_perf_SLOs"
    alloc = build_policy(name).allocate(inp)
    assert alloc.objective == pytest.approx(2 / 2.48 + 1 / 0.45, abs=1e-5)
    assert alloc.matrix[1, 0] == pytest.approx(1.0, abs=1e-5)
    # 1000 steps in 200 s needs 5 steps/s: impossible, solved without SLOs and noted.
    late = make_input(
        [[3.0, 1.0], [2.0, 1.0]],
        [1.0, 1.0],
        gpu_types=TWO_TYPES,
        remaining=[1000, 1000],
        slo=[np.nan, 200.0],
    )
    fallback = build_policy(name).allocate(late)
    assert fallback.objective == pytest.approx(3 / 2.48 + 1 / 0.45, abs=1e-5)
    assert any("SLOs infeasible" in note for note in fallback.notes)


def test_min_total_duration() -> None:
    # One GPU, 100 and 300 steps at 1 step/s: x0 >= 100/T, x1 >= 300/T, x0 + x1 <= 1
    # -> T = 400 s.
    inp = make_input([[1.0], [1.0]], [1.0], remaining=[100.0, 300.0])
    alloc = build_policy("min_total_duration_perf").allocate(inp)
    assert_feasible(alloc, inp)
    assert alloc.objective == pytest.approx(400.0, rel=1e-5)
    # Agnostic: every type at the v100 rate (2): T = 400 / 2 = 200 s on a v100-only view,
    # even though the (real) k80 would be slower.
    het = make_input(
        [[2.0, 1.0], [2.0, 1.0]], [1.0, 0.0], remaining=[100.0, 300.0], gpu_types=TWO_TYPES
    )
    assert build_policy("min_total_duration").allocate(het).objective == pytest.approx(
        200.0, rel=1e-5
    )


def test_isolated_equal_shares() -> None:
    # 3 jobs, 1 v100 and 2 k80: each gets 1/3 and 2/3 (row sum 1).
    inp = make_input([[1.0, 1.0]] * 3, [1.0, 2.0], gpu_types=TWO_TYPES)
    alloc = build_policy("isolated").allocate(inp)
    assert_feasible(alloc, inp)
    assert alloc.matrix[0] == pytest.approx([1 / 3, 2 / 3])


def test_isolated_scales_only_the_job_that_exceeds_a_whole_time_fraction() -> None:
    # Gavel's IsolatedPolicy, 4 + 4 GPUs, a 1-GPU and a 4-GPU job: each is owed 2 GPUs of
    # each type. The 1-GPU job's shares (2, 2) add up to 4 > 1: scaled to (1/2, 1/2). The
    # 4-GPU job's (1/2, 1/2) add up to 1 and stay (scaling it by the other job's excess,
    # as ProportionalPolicy-like code would, gives 1/8 each).
    inp = make_input(
        [[1.0, 1.0], [1.0, 1.0]], [4.0, 4.0], scale_factors=[1, 4], gpu_types=TWO_TYPES
    )
    alloc = build_policy("isolated").allocate(inp)
    assert_feasible(alloc, inp)
    assert alloc.matrix == pytest.approx(np.array([[0.5, 0.5], [0.5, 0.5]]))
    # Fractional demand counts like a scale factor: a 0.5-GPU job alone with 1 GPU is owed
    # 2 time fractions, scaled to 1.
    half = make_input([[1.0]], [1.0], demand=[0.5])
    assert build_policy("isolated").allocate(half).matrix[0, 0] == pytest.approx(1.0)


def test_isolated_gives_no_time_where_a_job_has_no_rate() -> None:
    # Gavel would give job 0 its k80 share too, which it cannot use; its throughput under
    # either allocation is the same: 2 steps/s * 1/2.
    inp = make_input([[2.0, 0.0], [1.0, 1.0]], [1.0, 1.0], gpu_types=TWO_TYPES)
    alloc = build_policy("isolated").allocate(inp)
    assert alloc.matrix == pytest.approx(np.array([[0.5, 0.0], [0.5, 0.5]]))


def test_gandiva_time_shares_then_packs_when_oversubscribed() -> None:
    inp = make_input([[1.0, 1.0], [1.0, 1.0]], [1.0, 1.0], gpu_types=TWO_TYPES)
    alloc = build_policy("gandiva").allocate(inp)
    assert alloc.matrix == pytest.approx(np.full((2, 2), 0.5))
    # Two jobs, one GPU, a candidate pair: they are packed and the pair gets the GPU.
    over = make_input([[1.0], [1.0]], [1.0], pairs=[(0, 1)], pair_rates=[[(0.7, 0.7)]])
    packed = build_policy("gandiva", seed=1).allocate(over)
    assert_feasible(packed, over)
    assert packed.pair_matrix is not None and packed.pair_matrix[0, 0] == pytest.approx(1.0)


def test_tiresias_queues_and_demotion() -> None:
    assert las_queues(np.array([0.0, 3599.0, 3600.0, 1e6]), (3600.0,)).tolist() == [0, 0, 1, 1]
    # Job 0 arrived first but has 5000 GPU-s: demoted to queue 1, so the later job 1
    # (queue 0) runs first on the only GPU.
    inp = make_input([[1.0], [1.0]], [1.0], arrival=[0.0, 10.0], attained=[5000.0, 100.0])
    alloc = build_policy("tiresias").allocate(inp)
    assert alloc.matrix[:, 0].tolist() == [0.0, 1.0]
    # Below the threshold the earlier job keeps its place (FIFO inside a queue).
    fresh = make_input([[1.0], [1.0]], [1.0], arrival=[0.0, 10.0], attained=[3000.0, 100.0])
    assert build_policy("las").allocate(fresh).matrix[:, 0].tolist() == [1.0, 0.0]


def test_tiresias_skips_jobs_that_do_not_fit() -> None:
    # The 2-GPU job cannot fit 1 free GPU; the 1-GPU job behind it runs (no blocking).
    inp = make_input([[1.0], [1.0]], [1.0], scale_factors=[2, 1], arrival=[0, 1])
    assert build_policy("tiresias").allocate(inp).matrix[:, 0].tolist() == [0.0, 1.0]
