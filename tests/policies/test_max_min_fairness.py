"""Max-min fairness on hand-checkable cases; expected objectives worked out in comments."""

from __future__ import annotations

import numpy as np
import pytest
from policy_builders import assert_feasible, make_input

from gpumosaic.policies.registry import build_policy


@pytest.mark.parametrize("backend", ["clarabel", "highs", "cvxpy"])
def test_perf_two_jobs_two_types(backend: str) -> None:
    # prop_0 = (2*1 + 1*1) / 2 = 1.5, prop_1 = (4 + 1) / 2 = 2.5.
    # Job 1 gains more from the v100 (4x vs 2x). Splitting both types half-half
    # (v100: a to job 1, k80: a to job 0, a = 1/2) equalizes
    # n_0 = (2(1 - a) + a) / 1.5 = 1 and n_1 = (4a + 1 - a) / 2.5 = 1.  Objective 1.0.
    inp = make_input([[2.0, 1.0], [4.0, 1.0]], [1.0, 1.0], gpu_types=("v100", "k80"))
    alloc = build_policy("max_min_fairness_perf", backend=backend).allocate(inp)
    assert_feasible(alloc, inp)
    assert alloc.objective == pytest.approx(1.0, abs=1e-6)
    normalized = (inp.throughputs * alloc.matrix).sum(axis=1) / np.array([1.5, 2.5])
    assert normalized.min() == pytest.approx(1.0, abs=1e-6)


def test_las_ignores_throughputs_and_honours_weights() -> None:
    # LAS objective per job: sf / w * time share.  min(x0 / 1, x1 / 2), x0 + x1 <= 1
    # -> x0 = 1/3, x1 = 2/3, objective 1/3 (the weight-2 job gets twice the time).
    inp = make_input([[5.0], [1.0]], [1.0], weights=[1.0, 2.0])
    alloc = build_policy("max_min_fairness").allocate(inp)
    assert_feasible(alloc, inp)
    assert alloc.objective == pytest.approx(1 / 3, abs=1e-6)
    assert alloc.matrix[:, 0] == pytest.approx([1 / 3, 2 / 3], abs=1e-6)


def test_fractional_jobs_share_one_gpu() -> None:
    # Two 500-milli jobs (demand 0.5) on one GPU: 0.5 x1 + 0.5 x1 = 1 <= 1, so both run
    # all the time. Objective 1.0. With whole-GPU demand they would get 0.5 each.
    inp = make_input([[1.0], [1.0]], [1.0], demand=[0.5, 0.5])
    alloc = build_policy("max_min_fairness").allocate(inp)
    assert_feasible(alloc, inp)
    assert alloc.matrix[:, 0] == pytest.approx([1.0, 1.0], abs=1e-6)
    whole = build_policy("max_min_fairness").allocate(make_input([[1.0], [1.0]], [1.0]))
    assert whole.matrix[:, 0] == pytest.approx([0.5, 0.5], abs=1e-6)


def test_scale_factor_counts_in_objective_and_capacity() -> None:
    # Job 0 needs 2 GPUs, job 1 one; 2 GPUs.  Objective min(2 x0, 1 x1) with
    # 2 x0 + x1 <= 2 and rows <= 1 -> x1 = 1, x0 = 1/2, objective 1.0.
    inp = make_input([[1.0], [1.0]], [2.0], scale_factors=[2, 1])
    alloc = build_policy("max_min_fairness").allocate(inp)
    assert_feasible(alloc, inp)
    assert alloc.objective == pytest.approx(1.0, abs=1e-6)
    assert alloc.matrix[:, 0] == pytest.approx([0.5, 1.0], abs=1e-6)


def test_job_without_throughput_gets_nothing_there() -> None:
    inp = make_input([[1.0, 0.0], [1.0, 1.0]], [1.0, 1.0], gpu_types=("v100", "k80"))
    alloc = build_policy("max_min_fairness_perf").allocate(inp)
    assert_feasible(alloc, inp)
    assert alloc.matrix[0, 1] == 0.0


def test_job_that_runs_nowhere_is_noted_not_pinning_the_minimum() -> None:
    inp = make_input([[0.0], [1.0]], [1.0])
    alloc = build_policy("max_min_fairness_perf").allocate(inp)
    assert alloc.matrix[0, 0] == 0.0
    assert alloc.objective == pytest.approx(1.0, abs=1e-6)
    assert any("no throughput" in note for note in alloc.notes)


@pytest.mark.parametrize(
    "name", ["max_min_fairness", "max_min_fairness_perf", "max_min_fairness_water_filling_perf"]
)
def test_merging_identical_jobs_keeps_the_optimum(name: str) -> None:
    from gpumosaic.policies.synthetic import gavel_policy_input

    inp = gavel_policy_input(60, np.random.default_rng(5), multi_gpu=True)
    merged = build_policy(name).allocate(inp)
    separate = build_policy(name, aggregate=False).allocate(inp)
    assert_feasible(merged, inp)
    assert merged.objective == pytest.approx(separate.objective, rel=1e-5, abs=1e-6)
    assert "job class" in merged.notes[0]
    # Identical jobs (same type and scale factor here) get identical rows.
    first_row: dict[tuple[str, int], np.ndarray] = {}
    for j, key in enumerate(zip(inp.job_types, inp.scale_factors.tolist(), strict=True)):
        row = first_row.setdefault(key, merged.matrix[j])
        assert merged.matrix[j] == pytest.approx(row)
