"""Finish-time fairness (Themis' rho; Gavel's ``finish_time_fairness``, ``_perf``, ``_packed``).

For job j with t_j seconds since arrival and rem_j steps left:

    rho_j(X) = (t_j + rem_j / rate_j(X)) / (t_j + rem_j / iso_j)

where rate_j(X) is its effective throughput under X and iso_j its throughput under the
LAS (``max_min_fairness``) allocation, Gavel's "isolated" reference. The policy minimizes
max_j rho_j. rem_j / rate_j is convex in X (inv_pos of an affine function), so this is
one conic program, solved with cvxpy (Clarabel), vectorized over jobs.

The agnostic variant sets every throughput to 1 (rates are GPU time shares). Gavel
accepts priority weights here but does not use them; neither do we.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from gpumosaic.fallbacks import Fallback, Fallbacks
from gpumosaic.policies.base import Allocation, PackedPairs, PolicyInput, PolicyTraits, lp_traits
from gpumosaic.policies.lp_base import (
    allocation_from_solution,
    build_base_constraints,
    empty_allocation,
    job_rate_matrix,
    usable_pairs,
)
from gpumosaic.policies.lp_solve import PolicySolveError
from gpumosaic.policies.max_min_fairness import MaxMinFairness


@dataclass(frozen=True, slots=True)
class FinishTimeFairness:
    name: str = "finish_time_fairness_perf"
    heterogeneity_aware: bool = True
    use_pairs: bool = False
    backend: str = "clarabel"  # for the LAS reference LP
    # The min-max objective has many optimal allocations and each solver returns its own;
    # ECOS is Gavel's, and with it the static trace matches Gavel (CLARABEL: makespan +10%).
    conic_solver: str = "ECOS"

    @property
    def traits(self) -> PolicyTraits:
        return lp_traits(self.heterogeneity_aware, self.use_pairs)

    def allocate(self, inp: PolicyInput) -> Allocation:
        if inp.num_jobs == 0:
            return empty_allocation(inp)
        las = MaxMinFairness("max_min_fairness", heterogeneity_aware=False, backend=self.backend)
        x_las = las.allocate(inp).matrix
        if self.heterogeneity_aware:
            throughputs = np.asarray(inp.throughputs, dtype=np.float64)
        else:
            throughputs = (inp.throughputs > 0).astype(np.float64)
        iso = (throughputs * x_las).sum(axis=1)
        pairs = usable_pairs(inp, self.use_pairs)
        if pairs is not None and not self.heterogeneity_aware:
            pairs = PackedPairs(pairs.pairs, (pairs.throughputs > 0).astype(np.float64))
        base = build_base_constraints(inp, pairs)
        pair_rates = None if pairs is None else pairs.throughputs
        rates = job_rate_matrix(base.layout, throughputs, pair_rates, pairs)
        since_arrival = np.maximum(inp.now_s - np.asarray(inp.arrival_s, dtype=np.float64), 0.0)
        remaining = np.asarray(inp.remaining_steps, dtype=np.float64)
        # Jobs with nothing left or no reference throughput cannot be compared; the rest
        # enter the objective. A job outside it still gets capacity only if it is free.
        active = np.flatnonzero((remaining > 0) & (iso > 0))
        notes: tuple[str, ...] = ()
        if len(active) < inp.num_jobs:
            notes = (f"{inp.num_jobs - len(active)} job(s) without remaining work or reference",)
        if len(active) == 0:
            return empty_allocation(inp, notes)
        reference_time = since_arrival[active] + remaining[active] / iso[active]
        # cvxpy takes ~0.6 s to import: only the runs that use this policy pay for it.
        import cvxpy as cp

        v = cp.Variable(base.layout.num_vars, nonneg=True)
        rate = rates[active] @ v
        rho = cp.multiply(remaining[active] / reference_time, cp.inv_pos(rate)) + (
            since_arrival[active] / reference_time
        )
        problem = cp.Problem(
            cp.Minimize(cp.max(rho)), [base.a_ub @ v <= base.b_ub, v <= base.upper]
        )
        try:
            with warnings.catch_warnings():
                # cvxpy warns on OPTIMAL_INACCURATE; we record that in the notes instead.
                warnings.simplefilter("ignore", UserWarning)
                problem.solve(solver=self.conic_solver)
        except cp.error.SolverError as err:
            raise PolicySolveError(f"{self.name}: {self.conic_solver} failed: {err}") from None
        if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or v.value is None:
            raise PolicySolveError(f"{self.name}: {self.conic_solver} status {problem.status}")
        fallbacks = Fallbacks()
        if problem.status == cp.OPTIMAL_INACCURATE:
            notes = (*notes, f"{self.conic_solver}: optimal_inaccurate")
            fallbacks = Fallbacks.of(Fallback.SOLVE_INACCURATE)
        values = np.clip(np.asarray(v.value, dtype=np.float64), 0.0, base.upper)
        return allocation_from_solution(
            inp, base.layout, values, pairs, float(problem.value), notes, fallbacks
        )
