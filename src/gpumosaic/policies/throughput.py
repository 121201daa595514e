"""Maximize total throughput, optionally per dollar and under SLOs (Gavel's max_sum_throughput*).

What it optimises, in Gavel's terms (``ThroughputSumWithPerf``,
``ThroughputNormalizedByCostSumWithPerf[SLOs]``, ``...WithPackingSLOs``): over the base
constraints,

- ``max_sum_throughput_perf``: maximize sum_j rate_j(X), rate_j(X) = sum_t thr[j, t] X[j, t]
  in steps/s (unweighted: priority weights and scale factors do not enter);
- ``..._normalized_by_cost_...``: maximize sum_{j,t} thr[j, t] X[j, t] / cost_t, where
  cost_t is ``PolicyInput.cost_per_hour`` or Gavel's on-demand prices (v100 2.48,
  p100 1.46, k80 0.45 $/h);
- ``_packed``: a job's rate also counts Y[k, t] times its rate inside pair k.

SLOs: a job with a deadline must keep rate_j(X) >= rem_j / (time left to its deadline),
where the deadline is ``arrival_s + slo_s``. A job already past its deadline is left out
(noted). If the SLOs cannot all be met, the problem is solved again without them, as
Gavel does: counted in ``Allocation.fallbacks`` (``slos_dropped``) and noted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from gpumosaic.fallbacks import Fallback, Fallbacks
from gpumosaic.policies.base import Allocation, FloatArray, PolicyInput, PolicyTraits, lp_traits
from gpumosaic.policies.lp_base import (
    allocation_from_solution,
    build_base_constraints,
    empty_allocation,
    job_rate_matrix,
    pair_coefficients,
    usable_pairs,
)
from gpumosaic.policies.lp_solve import LinearProgram, PolicySolveError, solve

if TYPE_CHECKING:
    import scipy.sparse as sp

GAVEL_COST_PER_HOUR: Mapping[str, float] = {"v100": 2.48, "p100": 1.46, "k80": 0.45}


def cost_per_hour(
    inp: PolicyInput, defaults: Mapping[str, float] = GAVEL_COST_PER_HOUR
) -> FloatArray:
    if inp.cost_per_hour is not None:
        return np.asarray(inp.cost_per_hour, dtype=np.float64)
    missing = [g for g in inp.gpu_types if g.lower() not in defaults]
    if missing:
        raise ValueError(
            f"no cost per hour for GPU type(s) {missing}: set PolicyInput.cost_per_hour"
        )
    return np.array([defaults[g.lower()] for g in inp.gpu_types])


@dataclass(frozen=True, slots=True)
class MaxSumThroughput:
    name: str = "max_sum_throughput_perf"
    normalize_by_cost: bool = False
    use_slos: bool = False
    use_pairs: bool = False
    backend: str = "clarabel"
    default_costs: Mapping[str, float] = field(default_factory=lambda: dict(GAVEL_COST_PER_HOUR))

    @property
    def traits(self) -> PolicyTraits:
        return lp_traits(heterogeneity_aware=True, use_pairs=self.use_pairs)

    def allocate(self, inp: PolicyInput) -> Allocation:
        import scipy.sparse as sp

        if inp.num_jobs == 0:
            return empty_allocation(inp)
        pairs = usable_pairs(inp, self.use_pairs)
        base = build_base_constraints(inp, pairs)
        throughputs = np.asarray(inp.throughputs, dtype=np.float64)
        ones = np.ones(inp.num_jobs)
        rates = job_rate_matrix(base.layout, throughputs, pair_coefficients(pairs, ones), pairs)
        if self.normalize_by_cost:
            per_type = 1.0 / cost_per_hour(inp, self.default_costs)
            col_cost = np.concatenate(
                [np.tile(per_type, inp.num_jobs), np.tile(per_type, base.layout.n_pairs)]
            )
            objective = np.asarray(rates.sum(axis=0)).reshape(-1) * col_cost
        else:
            objective = np.asarray(rates.sum(axis=0)).reshape(-1)
        program = LinearProgram(
            c=-objective,
            a_ub=base.a_ub,
            b_ub=base.b_ub,
            lower=np.zeros(base.layout.num_vars),
            upper=base.upper,
        )
        notes: list[str] = []
        fallbacks = Fallbacks()
        if self.use_slos and inp.slo_s is not None:
            slo_rows, slo_rhs, late = _slo_constraints(inp, rates)
            if late:
                notes.append(f"{late} job(s) already past their SLO deadline: left out")
                fallbacks = Fallbacks.of(Fallback.SLO_JOBS_LEFT_OUT, late)
            if slo_rows.shape[0]:
                with_slos = LinearProgram(
                    c=program.c,
                    a_ub=sp.csr_array(sp.vstack([base.a_ub, -slo_rows], format="csr")),
                    b_ub=np.concatenate([base.b_ub, -slo_rhs]),
                    lower=program.lower,
                    upper=program.upper,
                )
                try:
                    solution = solve(with_slos, self.backend)
                    return allocation_from_solution(
                        inp,
                        base.layout,
                        solution.values,
                        pairs,
                        -solution.objective,
                        tuple(notes),
                        fallbacks,
                    )
                except PolicySolveError as err:
                    notes.append(f"SLOs infeasible ({err}); solved without SLOs")
                    fallbacks += Fallbacks.of(Fallback.SLOS_DROPPED)
        solution = solve(program, self.backend)
        return allocation_from_solution(
            inp, base.layout, solution.values, pairs, -solution.objective, tuple(notes), fallbacks
        )


def _slo_constraints(inp: PolicyInput, rates: sp.csr_array) -> tuple[sp.csr_array, FloatArray, int]:
    """Rows of ``rates`` for jobs with a live SLO, their required rates, and the late count."""
    import scipy.sparse as sp

    assert inp.slo_s is not None
    slo = np.asarray(inp.slo_s, dtype=np.float64)
    time_left = np.asarray(inp.arrival_s, dtype=np.float64) + slo - inp.now_s
    has_slo = np.isfinite(slo)
    live = has_slo & (time_left > 0)
    late = int((has_slo & ~live).sum())
    rows = np.flatnonzero(live)
    required = np.asarray(inp.remaining_steps, dtype=np.float64)[rows] / time_left[rows]
    return sp.csr_array(rates[rows]), required, late
