"""Water filling and finish-time fairness on hand-checkable cases."""

from __future__ import annotations

import pytest
from policy_builders import assert_feasible, make_input

from gpumosaic.policies.registry import build_policy


def test_water_filling_raises_jobs_that_max_min_leaves_slack_for() -> None:
    # Jobs 0 and 1 run only on type A (1 GPU), job 2 only on B (1 GPU).
    # Max-min: level 1/2 for everyone; job 2 may get anything in [1/2, 1].
    # Water filling freezes jobs 0 and 1 at 1/2 and raises job 2 to 1 in round 2.
    inp = make_input([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], [1.0, 1.0], gpu_types=("a", "b"))
    alloc = build_policy("max_min_fairness_water_filling").allocate(inp)
    assert_feasible(alloc, inp)
    assert alloc.matrix[:, 0][:2] == pytest.approx([0.5, 0.5], abs=1e-5)
    assert alloc.matrix[2, 1] == pytest.approx(1.0, abs=1e-5)
    assert alloc.objective == pytest.approx(0.5, abs=1e-5)  # first round's max-min level
    assert "fallbacks=0" in alloc.notes[-1]


def test_water_filling_two_entities_fairness() -> None:
    # Entity a (weight 1) has jobs 0 and 1, entity b (weight 1) has job 2; one GPU.
    # Entities split the GPU 1/2 : 1/2, a's half is split 1/4 : 1/4 among its jobs.
    inp = make_input(
        [[1.0], [1.0], [1.0]],
        [1.0],
        entities=("a", "a", "b"),
        entity_weights=(("a", 1.0), ("b", 1.0)),
    )
    alloc = build_policy("max_min_fairness_water_filling").allocate(inp)
    assert_feasible(alloc, inp)
    assert alloc.matrix[:, 0] == pytest.approx([0.25, 0.25, 0.5], abs=1e-5)


def test_water_filling_two_entities_weighted_and_fifo_inside() -> None:
    # Entity a weight 3, b weight 1: a gets 3/4 of the GPU. With FIFO inside entities,
    # a's earliest job (job 0) takes all of a's share; job 1 waits.
    inp = make_input(
        [[1.0], [1.0], [1.0]],
        [1.0],
        arrival=[0.0, 10.0, 5.0],
        entities=("a", "a", "b"),
        entity_weights=(("a", 3.0), ("b", 1.0)),
    )
    alloc = build_policy("max_min_fairness_water_filling", entity_policy="fifo").allocate(inp)
    assert_feasible(alloc, inp)
    assert alloc.matrix[:, 0] == pytest.approx([0.75, 0.0, 0.25], abs=1e-5)
    assert "fallbacks=0" in alloc.notes[-1]


def test_finish_time_fairness_equal_jobs() -> None:
    # Two equal jobs on one GPU, no history: LAS gives 1/2 each, so iso = 1/2 and the
    # reference finish time is 100 / 0.5 = 200 s. rho = (100 / x) / 200 is minimized at
    # x = 1/2 for both: rho = 1.
    inp = make_input([[1.0], [1.0]], [1.0], remaining=[100.0, 100.0])
    alloc = build_policy("finish_time_fairness").allocate(inp)
    assert_feasible(alloc, inp)
    assert alloc.objective == pytest.approx(1.0, abs=1e-4)
    assert alloc.matrix[:, 0] == pytest.approx([0.5, 0.5], abs=1e-4)


def test_finish_time_fairness_perf_uses_heterogeneity() -> None:
    # Job 0 is 2x faster on A, job 1 2x faster on B; one GPU of each, 100 steps left.
    # LAS (interior point) splits both types evenly: iso = (2 + 1) / 2 = 1.5 steps/s, so
    # the reference finish time is 100 / 1.5 s. Giving each job its fast type: rate 2,
    # rho = (100 / 2) / (100 / 1.5) = 0.75 for both. Objective 0.75.
    inp = make_input(
        [[2.0, 1.0], [1.0, 2.0]], [1.0, 1.0], remaining=[100.0, 100.0], gpu_types=("a", "b")
    )
    alloc = build_policy("finish_time_fairness_perf").allocate(inp)
    assert_feasible(alloc, inp)
    assert alloc.objective == pytest.approx(0.75, abs=1e-4)
    assert alloc.matrix.ravel() == pytest.approx([1.0, 0.0, 0.0, 1.0], abs=1e-4)


def test_finish_time_fairness_counts_time_already_spent() -> None:
    # As above, but job 0 has waited 300 s. rho_0 = (300 + 100 / r0) / (300 + 100 / 1.5)
    # is already near 1 whatever it gets, so the optimum still gives both jobs their fast
    # type (rho_0 = 350 / 366.7 = 0.9545, rho_1 = 0.75) and the objective is rho_0.
    inp = make_input(
        [[2.0, 1.0], [1.0, 2.0]],
        [1.0, 1.0],
        remaining=[100.0, 100.0],
        arrival=[0.0, 300.0],
        now=300.0,
        gpu_types=("a", "b"),
    )
    alloc = build_policy("finish_time_fairness_perf").allocate(inp)
    assert_feasible(alloc, inp)
    assert alloc.objective == pytest.approx(350 / (300 + 100 / 1.5), abs=1e-4)


def test_water_filling_counts_a_failed_bottleneck_milp(monkeypatch: pytest.MonkeyPatch) -> None:
    import gpumosaic.policies.hierarchical as hierarchical
    from gpumosaic.policies.lp_solve import PolicySolveError

    real_solve = hierarchical.solve

    def failing_milp(program, backend="clarabel"):  # type: ignore[no-untyped-def]
        if program.integer is not None:
            raise PolicySolveError("HiGHS MILP failed: status 1 (injected)")
        return real_solve(program, backend)

    monkeypatch.setattr(hierarchical, "solve", failing_milp)
    inp = make_input([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], [1.0, 1.0], gpu_types=("a", "b"))
    alloc = build_policy("max_min_fairness_water_filling", aggregate=False).allocate(inp)
    assert_feasible(alloc, inp)
    assert "fallbacks=1" in alloc.notes[-1]
    assert any("bottleneck MILP failed" in note for note in alloc.notes)


def test_water_filling_first_lp_failure_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    import gpumosaic.policies.hierarchical as hierarchical
    from gpumosaic.policies.lp_solve import PolicySolveError

    def failing(program, backend="clarabel"):  # type: ignore[no-untyped-def]
        raise PolicySolveError("Clarabel LP failed: status PrimalInfeasible (injected)")

    monkeypatch.setattr(hierarchical, "solve", failing)
    inp = make_input([[1.0], [1.0]], [1.0])
    with pytest.raises(PolicySolveError, match="first water-filling LP"):
        build_policy("max_min_fairness_water_filling").allocate(inp)
