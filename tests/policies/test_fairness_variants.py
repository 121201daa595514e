"""Water filling and finish-time fairness on hand-checkable cases."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from policy_builders import assert_feasible, make_input

from gpumosaic.fallbacks import Fallback
from gpumosaic.policies.base import PolicyInput
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


@pytest.mark.slow  # finish-time fairness's conic solve: seconds of CPU
def test_finish_time_fairness_equal_jobs() -> None:
    # Two equal jobs on one GPU, no history: the isolated share is 1/2 each, so iso = 1/2
    # and the isolated finish time is 100 / 0.5 = 200 s. rho = (100 / x) / 200 is
    # minimized at x = 1/2 for both: rho = 1.
    inp = make_input([[1.0], [1.0]], [1.0], remaining=[100.0, 100.0])
    alloc = build_policy("finish_time_fairness").allocate(inp)
    assert_feasible(alloc, inp)
    assert alloc.objective == pytest.approx(1.0, abs=1e-4)
    assert alloc.matrix[:, 0] == pytest.approx([0.5, 0.5], abs=1e-4)


def test_finish_time_fairness_perf_uses_heterogeneity() -> None:
    # Job 0 is 2x faster on A, job 1 2x faster on B; one GPU of each, 100 steps left.
    # Isolated share: 1/2 of each type, iso = (2 + 1) / 2 = 1.5 steps/s, isolated finish
    # time 100 / 1.5 s. Each job on its fast type: rate 2, rho = (100 / 2) / (100 / 1.5)
    # = 0.75 for both. Objective 0.75.
    inp = make_input(
        [[2.0, 1.0], [1.0, 2.0]], [1.0, 1.0], remaining=[100.0, 100.0], gpu_types=("a", "b")
    )
    alloc = build_policy("finish_time_fairness_perf").allocate(inp)
    assert_feasible(alloc, inp)
    assert alloc.objective == pytest.approx(0.75, abs=1e-4)
    assert alloc.matrix.ravel() == pytest.approx([1.0, 0.0, 0.0, 1.0], abs=1e-4)


def test_finish_time_fairness_waiting_counts_against_the_job() -> None:
    # As above, but job 0 arrived 300 s ago and has run no step: its isolated time so far
    # is 0, so rho_0 = (300 + 100 / r0) / (0 + 100 / 1.5) >= 350 / 66.7 = 5.25 (r0 <= 2).
    # The optimum gives job 0 its fast type; the objective is rho_0 = 5.25.
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
    assert alloc.objective == pytest.approx(350 / (100 / 1.5), rel=1e-5)
    assert alloc.matrix[0, 0] == pytest.approx(1.0, abs=1e-4)


def test_finish_time_fairness_ledger_counts_done_work_at_the_isolated_rate_of_its_time() -> None:
    # Call 1: job 0 alone on one GPU (rate 1): isolated share 1, iso = 1.
    # Call 2 at t = 60: job 0 ran 60 steps (40 left), job 1 arrives fresh (100 steps).
    # Isolated share now 1/2, iso = 0.5 for both. Job 0's 60 steps count as 60 / 1 = 60 s
    # of isolated time (the iso of call 1, as Gavel's ledger): reference 60 + 40 / 0.5 =
    # 140 s; job 1's is 100 / 0.5 = 200 s. rho_0 = (60 + 40 / x0) / 140 and rho_1 =
    # (100 / x1) / 200 with x0 + x1 = 1 are equal at 6 x0^2 + 5 x0 - 4 = 0: x0 = 1/2,
    # rho = 1.
    policy = build_policy("finish_time_fairness")
    first = make_input([[1.0]], [1.0], remaining=[100.0])
    assert policy.allocate(first).objective == pytest.approx(1.0, abs=1e-5)
    second = replace(
        make_input([[1.0], [1.0]], [1.0], remaining=[40.0, 100.0], arrival=[0.0, 60.0], now=60.0),
        total_steps=np.array([100.0, 100.0]),
    )
    alloc = policy.allocate(second)
    assert alloc.matrix[:, 0] == pytest.approx([0.5, 0.5], abs=1e-4)
    assert alloc.objective == pytest.approx(1.0, rel=1e-5)
    # A fresh policy has no ledger: job 0's 60 steps count at today's iso, 60 / 0.5 =
    # 120 s (reference 200 s): 3 x0^2 + 4 x0 - 2 = 0, x0 = (sqrt(10) - 2) / 3 = 0.3874.
    fresh = build_policy("finish_time_fairness").allocate(second)
    assert fresh.matrix[0, 0] == pytest.approx((np.sqrt(10) - 2) / 3, abs=1e-4)


def test_finish_time_fairness_agnostic_runs_every_type_at_the_v100_rate() -> None:
    # One v100 and one k80, one job 2 steps/s on the v100 and 1 on the k80, 100 steps.
    # Agnostic: rate 2 on both types. Isolated share: 1 of each type, scaled to a time
    # fraction of 1 (1/2, 1/2): iso = 2. rho = (100 / r) / (100 / 2) = 1 at r = 2, which
    # any full row reaches in the agnostic view (under measured rates the k80 gives 1).
    inp = make_input([[2.0, 1.0]], [1.0, 1.0], remaining=[100.0], gpu_types=("v100", "k80"))
    alloc = build_policy("finish_time_fairness").allocate(inp)
    assert alloc.objective == pytest.approx(1.0, rel=1e-5)


def test_finish_time_fairness_las_reference_variant() -> None:
    # gpumosaic's LAS-referenced variant: reference = the LAS rate (interior point splits
    # both types evenly: 1.5 steps/s) and elapsed time on both sides. Job 0 waited 300 s:
    # rho_0 = (300 + 100 / 2) / (300 + 100 / 1.5) = 0.9545 with each job on its fast type.
    inp = make_input(
        [[2.0, 1.0], [1.0, 2.0]],
        [1.0, 1.0],
        remaining=[100.0, 100.0],
        arrival=[0.0, 300.0],
        now=300.0,
        gpu_types=("a", "b"),
    )
    alloc = build_policy("finish_time_fairness_perf", reference="las").allocate(inp)
    assert_feasible(alloc, inp)
    assert alloc.objective == pytest.approx(350 / (300 + 100 / 1.5), abs=1e-4)
    with pytest.raises(ValueError, match="reference must be one of"):
        build_policy("finish_time_fairness", reference="proportional")


def test_finish_time_fairness_solver_failure_falls_back_to_isolated_and_counts() -> None:
    inp = make_input([[1.0], [1.0]], [1.0], remaining=[100.0, 100.0])
    alloc = build_policy("finish_time_fairness", conic_solver="NO_SUCH_SOLVER").allocate(inp)
    assert alloc.fallbacks.count(Fallback.POLICY_SOLVE_FAILED) == 1
    assert any("used the isolated allocation" in note for note in alloc.notes)
    assert alloc.matrix[:, 0] == pytest.approx([0.5, 0.5])


def test_water_filling_counts_a_failed_bottleneck_test(monkeypatch: pytest.MonkeyPatch) -> None:
    import gpumosaic.policies.hierarchical as hierarchical
    from gpumosaic.policies.lp_solve import PolicySolveError

    real_solve = hierarchical.solve
    calls = []

    def failing_second(program, backend="clarabel"):  # type: ignore[no-untyped-def]
        calls.append(program)
        if len(calls) == 2:  # round 1's bottleneck test
            raise PolicySolveError("Clarabel LP failed: status NumericalError (injected)")
        return real_solve(program, backend)

    monkeypatch.setattr(hierarchical, "solve", failing_second)
    inp = make_input([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], [1.0, 1.0], gpu_types=("a", "b"))
    alloc = build_policy("max_min_fairness_water_filling", aggregate=False).allocate(inp)
    assert_feasible(alloc, inp)
    assert "fallbacks=1" in alloc.notes[-1]
    assert alloc.fallbacks.count(Fallback.POLICY_SOLVE_FAILED) == 1
    assert any("bottleneck test failed" in note for note in alloc.notes)


def test_water_filling_first_lp_failure_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    import gpumosaic.policies.hierarchical as hierarchical
    from gpumosaic.policies.lp_solve import PolicySolveError

    def failing(program, backend="clarabel"):  # type: ignore[no-untyped-def]
        raise PolicySolveError("Clarabel LP failed: status PrimalInfeasible (injected)")

    monkeypatch.setattr(hierarchical, "solve", failing)
    inp = make_input([[1.0], [1.0]], [1.0])
    with pytest.raises(PolicySolveError, match="first water-filling LP"):
        build_policy("max_min_fairness_water_filling").allocate(inp)


def test_water_filling_freezes_no_job_below_level_one_tenth() -> None:
    # 20 jobs share one GPU of type a (level 1/20 = 0.05 < 0.1); job 20 alone on type b.
    # Gavel's "z = 0 => n <= level * slack - 1e-5" row is infeasible below level 0.1 and
    # froze every job after round 1; water filling must freeze the 20 at 0.05 and raise
    # job 20 to its whole GPU.
    inp = make_input([[1.0, 0.0]] * 20 + [[0.0, 1.0]], [1.0, 1.0], gpu_types=("a", "b"))
    for name in ("max_min_fairness_water_filling", "max_min_fairness_water_filling_perf"):
        alloc = build_policy(name).allocate(inp)
        assert_feasible(alloc, inp)
        assert not alloc.fallbacks
        assert alloc.matrix[:20, 0] == pytest.approx([0.05] * 20, abs=1e-6)
        assert alloc.matrix[20, 1] == pytest.approx(1.0, abs=1e-6)


def overshooting_solve(monkeypatch: pytest.MonkeyPatch, relative: float) -> None:
    """Make every LP of water filling report a level ``relative`` above its optimum (an
    interior-point solver's overshoot, ~1e-10 with Clarabel or ECOS)."""
    import gpumosaic.policies.hierarchical as hierarchical
    from gpumosaic.policies.lp_solve import LpSolution

    real_solve = hierarchical.solve

    def solve(program, backend="clarabel"):  # type: ignore[no-untyped-def]
        solution = real_solve(program, backend)
        if program.integer is not None:
            return solution
        values = solution.values.copy()
        values[-1] *= 1.0 + relative
        return LpSolution(values, solution.objective, solution.backend)

    monkeypatch.setattr(hierarchical, "solve", solve)


def twenty_five_classes() -> PolicyInput:
    rng = np.random.default_rng(3)
    thr = rng.uniform(0.2, 5.0, size=(25, 3)).round(3)
    thr[rng.random((25, 3)) < 0.2] = 0.0
    thr[:, 0] = np.where(thr.sum(axis=1) == 0, 1.0, thr[:, 0])
    return make_input(
        thr,
        [4.0, 8.0, 12.0],
        scale_factors=rng.choice([1, 2, 4], size=25),
        weights=rng.choice([1.0, 2.0, 3.0], size=25),
    )


def test_water_filling_is_immune_to_an_lp_level_overshoot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 25 job classes. With the LP's level taken at face value, the bottleneck test had to
    # keep every job at a level above what any allocation reaches: HiGHS then called 1 of
    # 25 classes improvable (or none, freezing all) where most were. The level now comes
    # from the allocation itself, so an overshoot changes nothing.
    inp = twenty_five_classes()
    policy = build_policy("max_min_fairness_water_filling_perf")
    exact = policy.allocate(inp)
    assert not exact.fallbacks
    rounds = int(exact.notes[-1].split(": ")[1].split(" ")[0])
    assert rounds > 3  # jobs are frozen a few at a time, not all after round 1
    overshooting_solve(monkeypatch, 1e-9)
    shaken = policy.allocate(inp)
    assert not shaken.fallbacks
    assert shaken.notes[-1] == exact.notes[-1]
    rate = (inp.throughputs * shaken.matrix).sum(axis=1)
    assert rate == pytest.approx((inp.throughputs * exact.matrix).sum(axis=1), rel=1e-6)
