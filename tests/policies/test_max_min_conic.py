"""The max-min LP built straight in Clarabel's form (``singles_conic_lp``) against the
general path (``max_min_program`` -> ``solve`` -> ``clarabel_form``) and cvxpy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from policy_builders import assert_feasible, make_input

from gpumosaic.policies import lp_solve
from gpumosaic.policies.base import Allocation, PolicyInput
from gpumosaic.policies.lp_base import (
    aggregate_identical_jobs,
    allocation_from_solution,
    build_base_constraints,
    job_rate_matrix,
)
from gpumosaic.policies.max_min_conic import template_for
from gpumosaic.policies.max_min_fairness import (
    MaxMinFairness,
    max_min_program,
    normalized_rates,
    singles_conic_lp,
)


@st.composite
def policy_inputs(draw: st.DrawFn) -> PolicyInput:
    """Small random LPs: 1-7 jobs, 1-3 types, some rates 0 (a job that cannot run on a
    type, sometimes anywhere), mixed scale factors, fractional demand and weights."""
    n = draw(st.integers(1, 7))
    t = draw(st.integers(1, 3))
    rate = st.one_of(st.just(0.0), st.floats(0.1, 10.0))
    thr = [[draw(rate) for _ in range(t)] for _ in range(n)]
    scale = [draw(st.sampled_from([1, 1, 2, 4])) for _ in range(n)]
    milli = [draw(st.sampled_from([1.0, 1.0, 0.5, 0.25])) for _ in range(n)]
    demand = [s * m for s, m in zip(scale, milli, strict=True)]
    weights = [draw(st.sampled_from([1.0, 1.0, 2.0, 0.5])) for _ in range(n)]
    capacity = [float(draw(st.integers(1, 6))) for _ in range(t)]
    return make_input(thr, capacity, scale_factors=scale, demand=demand, weights=weights)


def _general_conic(inp: PolicyInput, hetero: bool) -> lp_solve.ConicLp | None:
    """What ``solve`` hands Clarabel on the general path (None: nothing to solve)."""
    base = build_base_constraints(inp, None, n_extra=1)
    single, _ = normalized_rates(inp, hetero, None)
    runnable = (single > 0).any(axis=1)
    if not runnable.any():
        return None
    rates = job_rate_matrix(base.layout, single, None, None)
    program = max_min_program(base, rates[np.flatnonzero(runnable)])
    captured: list[lp_solve.ConicLp] = []
    original = lp_solve.clarabel_form

    def capture(lp: lp_solve.LinearProgram) -> lp_solve.ConicLp:
        captured.append(original(lp))
        return captured[-1]

    lp_solve.clarabel_form = capture  # type: ignore[assignment]
    try:
        lp_solve.solve(program, "clarabel")
    finally:
        lp_solve.clarabel_form = original  # type: ignore[assignment]
    return captured[0]


@settings(max_examples=60, deadline=None)
@given(inp=policy_inputs(), hetero=st.booleans())
def test_direct_build_is_exactly_the_general_problem(inp: PolicyInput, hetero: bool) -> None:
    single, _ = normalized_rates(inp, hetero, None)
    runnable = (single > 0).any(axis=1)
    general = _general_conic(inp, hetero)
    if general is None:
        assert not runnable.any()
        return
    direct, keep = singles_conic_lp(inp, single, runnable)
    np.testing.assert_array_equal(keep, np.flatnonzero(inp.throughputs.reshape(-1) > 0))
    # Bit for bit: Clarabel then returns the same solution, so rounds decide the same.
    for name in ("q", "indptr", "indices", "data", "b"):
        np.testing.assert_array_equal(getattr(direct, name), getattr(general, name), name)
    assert np.signbit(direct.b).tolist() == np.signbit(general.b).tolist()


def _general_allocation(inp: PolicyInput, hetero: bool) -> Allocation:
    """The general path's allocation (scipy matrices, ``solve``, Clarabel)."""
    base = build_base_constraints(inp, None, n_extra=1)
    single, _ = normalized_rates(inp, hetero, None)
    runnable = (single > 0).any(axis=1)
    rates = job_rate_matrix(base.layout, single, None, None)
    program = max_min_program(base, rates[np.flatnonzero(runnable)])
    solution = lp_solve.solve(program, "clarabel")
    level = float(solution.values[-1])
    return allocation_from_solution(inp, base.layout, solution.values, None, level)


@settings(max_examples=25, deadline=None)
@given(inp=policy_inputs(), hetero=st.booleans())
def test_allocation_equals_the_general_path_and_cvxpy(inp: PolicyInput, hetero: bool) -> None:
    fast = MaxMinFairness(heterogeneity_aware=hetero, aggregate=False).allocate(inp)
    through_cvxpy = MaxMinFairness(
        heterogeneity_aware=hetero, aggregate=False, backend="cvxpy"
    ).allocate(inp)
    assert_feasible(fast, inp)
    assert fast.notes == through_cvxpy.notes
    single, _ = normalized_rates(inp, hetero, None)
    runnable = (single > 0).any(axis=1)
    if not runnable.any():
        assert fast.matrix.sum() == 0.0
        return
    general = _general_allocation(inp, hetero)
    np.testing.assert_array_equal(fast.matrix, general.matrix)
    assert fast.objective == general.objective
    # Through cvxpy the problem is canonicalized differently, so among several optimal
    # allocations another may come back; the max-min level is unique: equal within the
    # solvers' tolerance, and it is what the fast allocation delivers.
    assert fast.objective == pytest.approx(through_cvxpy.objective, rel=1e-5, abs=1e-6)
    level = ((single * fast.matrix).sum(axis=1))[runnable].min()
    assert level == pytest.approx(fast.objective, rel=1e-5, abs=1e-6)


@st.composite
def inputs_with_twins(draw: st.DrawFn) -> PolicyInput:
    """``policy_inputs`` with some jobs repeated (identical rows merge into classes)."""
    inp = draw(policy_inputs())
    picks = draw(st.lists(st.integers(0, inp.num_jobs - 1), min_size=1, max_size=12))
    rows = np.concatenate([np.arange(inp.num_jobs), np.asarray(picks)])
    return make_input(
        inp.throughputs[rows].tolist(),
        inp.capacity.tolist(),
        scale_factors=inp.scale_factors[rows].tolist(),
        demand=inp.demand[rows].tolist(),
        weights=inp.priority_weights[rows].tolist(),
    )


@settings(max_examples=25, deadline=None)
@given(inp=inputs_with_twins(), hetero=st.booleans())
def test_classes_from_the_template_equal_the_reduced_input_path(
    inp: PolicyInput, hetero: bool
) -> None:
    """The hot path merges identical jobs without building the reduced PolicyInput; it
    must return what solving ``aggregate_identical_jobs``'s reduced input returns."""
    policy = MaxMinFairness(heterogeneity_aware=hetero)
    fast = policy.allocate(inp)
    single, _ = normalized_rates(inp, hetero, None)
    classes = aggregate_identical_jobs(inp, single)
    assert len(classes.counts) < inp.num_jobs
    # ``_solve`` is the general path (scipy matrices, ``lp_solve.solve``).
    general = classes.expand(inp, policy._solve(classes.reduced, None))
    np.testing.assert_array_equal(fast.matrix, general.matrix)
    assert fast.objective == general.objective
    assert fast.notes == general.notes


def test_clarabel_reads_csc_arrays_as_it_reads_scipy() -> None:
    """``CscArrays`` relies on which attributes Clarabel's binding reads; a solve through
    scipy's CSC matrices (its documented input) must give the same bits."""
    import clarabel
    import scipy.sparse as sp

    inp = make_input([[4.0, 1.0, 0.0], [2.0, 2.0, 1.0], [1.0, 0.0, 3.0]], [2.0, 1.0, 1.0])
    single, _ = normalized_rates(inp, True, None)
    problem, _ = singles_conic_lp(inp, single, (single > 0).any(axis=1))
    m, n = problem.shape
    a = sp.csc_matrix((problem.data, problem.indices, problem.indptr), shape=(m, n))
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    cones = [clarabel.NonnegativeConeT(m)]
    solver = clarabel.DefaultSolver(sp.csc_matrix((n, n)), problem.q, a, problem.b, cones, settings)
    through_scipy = np.asarray(solver.solve().x)
    through_lists = lp_solve.solve_conic(problem)
    assert through_lists.tobytes() == through_scipy.tobytes()


def test_templates_are_cached_per_shape() -> None:
    a = make_input([[1.0, 2.0], [3.0, 0.0]], [1.0, 1.0])
    b = make_input([[5.0, 1.0], [7.0, 0.0]], [2.0, 3.0])  # same shape, other numbers
    runnable = np.ones(2, dtype=bool)
    assert template_for(a.throughputs, runnable) is template_for(b.throughputs, runnable)
    c = make_input([[1.0, 2.0], [3.0, 4.0]], [1.0, 1.0])  # X[1, 1] no longer pinned
    assert template_for(c.throughputs, runnable) is not template_for(a.throughputs, runnable)
