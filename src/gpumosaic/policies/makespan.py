"""Minimize the time until every current job is done (Gavel's ``min_total_duration*``).

What it optimises, in Gavel's terms (``MinTotalDurationPolicy[WithPerf|WithPacking]``):
the smallest T (seconds) with an X in the base constraints such that every job can
finish by T, rate_j(X) >= rem_j / T, i.e. minimize max_j rem_j / rate_j(X). Gavel
binary-searches T; with s = 1 / T that is one LP:

    maximize s  s.t.  rate_j(X) >= rem_j * s  for all j,  base constraints,

which gives the exact optimum instead of one within Gavel's 5% search tolerance.
``Allocation.objective`` is T = 1 / s in seconds.

The agnostic ``min_total_duration`` gives each job its throughput on the reference type
(``v100`` when present, else the first column) on every type, as Gavel does, except on
types where the job has no throughput (Gavel gives it the v100 rate there too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from gpumosaic.policies.base import Allocation, PolicyInput, PolicyTraits, lp_traits
from gpumosaic.policies.lp_base import (
    allocation_from_solution,
    build_base_constraints,
    empty_allocation,
    job_rate_matrix,
    usable_pairs,
)
from gpumosaic.policies.lp_solve import LinearProgram, solve

if TYPE_CHECKING:
    pass


@dataclass(frozen=True, slots=True)
class MinTotalDuration:
    name: str = "min_total_duration_perf"
    heterogeneity_aware: bool = True
    use_pairs: bool = False
    reference_type: str = "v100"
    backend: str = "clarabel"

    @property
    def traits(self) -> PolicyTraits:
        return lp_traits(self.heterogeneity_aware, self.use_pairs)

    def allocate(self, inp: PolicyInput) -> Allocation:
        import scipy.sparse as sp

        if inp.num_jobs == 0:
            return empty_allocation(inp)
        throughputs = np.asarray(inp.throughputs, dtype=np.float64)
        if not self.heterogeneity_aware:
            ref = (
                inp.gpu_types.index(self.reference_type)
                if self.reference_type in inp.gpu_types
                else 0
            )
            throughputs = np.where(throughputs > 0, throughputs[:, [ref]], 0.0)
        pairs = usable_pairs(inp, self.use_pairs)
        base = build_base_constraints(inp, pairs, n_extra=1)
        pair_rates = None if pairs is None else pairs.throughputs
        rates = job_rate_matrix(base.layout, throughputs, pair_rates, pairs)
        remaining = np.asarray(inp.remaining_steps, dtype=np.float64)
        active = np.flatnonzero(remaining > 0)
        if len(active) == 0:
            return empty_allocation(inp, ("no job has remaining work",))
        n_vars = base.layout.num_vars
        # Steps left run to 1e6 while rates are ~1 step/s: scale s by the largest remainder
        # so the solver sees numbers near 1.
        unit = float(remaining[active].max())
        s_col = sp.csr_array(
            (remaining[active] / unit, (np.arange(len(active)), np.full(len(active), n_vars - 1))),
            shape=(len(active), n_vars),
        )
        c = np.zeros(n_vars)
        c[-1] = -1.0
        program = LinearProgram(
            c=c,
            a_ub=sp.csr_array(sp.vstack([base.a_ub, s_col - rates[active]], format="csr")),
            b_ub=np.concatenate([base.b_ub, np.zeros(len(active))]),
            lower=np.zeros(n_vars),
            upper=np.concatenate([base.upper, [np.inf]]),
        )
        solution = solve(program, self.backend)
        speed = float(solution.values[-1]) / unit
        makespan = float("inf") if speed <= 0 else 1.0 / speed
        notes = () if speed > 0 else ("some job cannot run on any type: makespan unbounded",)
        return allocation_from_solution(inp, base.layout, solution.values, pairs, makespan, notes)
