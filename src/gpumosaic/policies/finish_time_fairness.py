"""Finish-time fairness (Themis' rho; Gavel's ``finish_time_fairness``, ``_perf``, ``_packed``).

What it optimises, in Gavel's terms: minimize max_j rho_j(X) over the base constraints,

    rho_j(X) = (t_j + rem_j / rate_j(X)) / (iso_time_j + rem_j / iso_j)

- t_j: seconds since job j arrived (Gavel's ``times_since_start``);
- rem_j: steps left; rate_j(X) = sum_t thr[j, t] X[j, t] (plus its pair terms with
  ``_packed``), in steps/s;
- iso_j: the job's throughput under Gavel's ``IsolatedPolicy``, i.e. an equal 1/m share of
  the cluster among the m jobs of this call (``isolated.isolated_throughputs``): Themis'
  "isolated" finish time is iso_time_j + rem_j / iso_j;
- iso_time_j: the work already done, counted in isolated time. As in Gavel, the policy
  keeps a ledger: at each call it adds (steps done since the previous call) / (iso_j of
  the previous call). A job the ledger has not seen before starts at its steps done so
  far / iso_j of this call (0 for a job that has not run, which is all Gavel ever sees).
  The ledger makes the policy stateful: build one object per run.

Priority weights do not enter (Gavel computes them and leaves them unused, with a note
in its code to use them later). rem_j / rate_j is convex in X (inv_pos of an affine
function), so this is one conic program, solved with cvxpy and ECOS (Gavel's solver) by default.

``finish_time_fairness`` (heterogeneity-agnostic) is the same with every usable type at
the job's throughput on ``reference_type`` (v100), as Gavel's. (Gavel also gives that
rate on types where the job has none; we keep those at 0, as ``min_total_duration``.)
A job with no remaining work or no isolated throughput is left out of the objective
(noted). If the solver fails, the allocation is the isolated one, as in Gavel, counted
in ``Allocation.fallbacks`` (``policy_solve_failed``) and described in the notes.

``reference="las"``: gpumosaic's own variant, not Gavel's. The reference is the job's
throughput under LAS (``max_min_fairness`` on the same rates, which uses the priority
weights), and both finish times count the elapsed time t_j:
rho_j = (t_j + rem_j / rate_j(X)) / (t_j + rem_j / las_j). It needs no ledger.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from gpumosaic.fallbacks import Fallback, Fallbacks
from gpumosaic.policies.base import (
    Allocation,
    FloatArray,
    PackedPairs,
    PolicyInput,
    PolicyTraits,
    lp_traits,
)
from gpumosaic.policies.isolated import Isolated, isolated_throughputs
from gpumosaic.policies.lp_base import (
    allocation_from_solution,
    build_base_constraints,
    empty_allocation,
    job_rate_matrix,
    usable_pairs,
)
from gpumosaic.policies.max_min_fairness import MaxMinFairness

REFERENCES = ("isolated", "las")


class IsolatedTimeLedger:
    """Per job: isolated time of the work done so far, and the last call's state.

    The one piece of mutable state of a ``FinishTimeFairness`` object (Gavel keeps the
    same three dictionaries in its policy object).
    """

    __slots__ = ("cumulative_s", "previous_iso", "previous_remaining")

    def __init__(self) -> None:
        self.cumulative_s: dict[int, float] = {}
        self.previous_remaining: dict[int, float] = {}
        self.previous_iso: dict[int, float] = {}

    def update(self, inp: PolicyInput, iso: FloatArray) -> FloatArray:
        """Advance to this call; return each job's isolated time of the work done."""
        remaining = np.asarray(inp.remaining_steps, dtype=np.float64)
        done = np.asarray(inp.total_steps, dtype=np.float64) - remaining
        out = np.zeros(inp.num_jobs)
        for j, job_id in enumerate(inp.job_ids):
            if job_id in self.previous_remaining:
                prev_iso = self.previous_iso[job_id]
                step = self.previous_remaining[job_id] - float(remaining[j])
                if prev_iso > 0:
                    self.cumulative_s[job_id] += step / prev_iso
            elif job_id not in self.cumulative_s:
                self.cumulative_s[job_id] = float(done[j] / iso[j]) if iso[j] > 0 else 0.0
            out[j] = self.cumulative_s[job_id]
        self.previous_remaining = dict(zip(inp.job_ids, remaining.tolist(), strict=True))
        self.previous_iso = dict(zip(inp.job_ids, iso.tolist(), strict=True))
        return out


@dataclass(frozen=True, slots=True)
class FinishTimeFairness:
    name: str = "finish_time_fairness_perf"
    heterogeneity_aware: bool = True
    use_pairs: bool = False
    reference: str = "isolated"  # or "las" (see the module docstring)
    reference_type: str = "v100"  # the agnostic variant's rate on every type
    backend: str = "clarabel"  # for the LAS reference LP
    # The min-max objective has many optimal allocations and each solver returns its own;
    # ECOS is Gavel's, and with it the static trace matches Gavel (CLARABEL: makespan +10%).
    conic_solver: str = "ECOS"
    ledger: IsolatedTimeLedger = field(
        default_factory=IsolatedTimeLedger, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.reference not in REFERENCES:
            raise ValueError(f"reference must be one of {REFERENCES}, got {self.reference!r}")

    @property
    def traits(self) -> PolicyTraits:
        return lp_traits(self.heterogeneity_aware, self.use_pairs)

    def allocate(self, inp: PolicyInput) -> Allocation:
        if inp.num_jobs == 0:
            return empty_allocation(inp)
        throughputs = self._rates(inp)
        since_arrival = np.maximum(inp.now_s - np.asarray(inp.arrival_s, dtype=np.float64), 0.0)
        if self.reference == "isolated":
            iso = isolated_throughputs(inp, throughputs)
            done_s = self.ledger.update(inp, iso)
        else:
            las = MaxMinFairness("las", heterogeneity_aware=False, backend=self.backend)
            iso = (throughputs * las.allocate(inp).matrix).sum(axis=1)
            done_s = since_arrival
        pairs = usable_pairs(inp, self.use_pairs)
        if pairs is not None and not self.heterogeneity_aware:
            pairs = PackedPairs(pairs.pairs, (pairs.throughputs > 0).astype(np.float64))
        base = build_base_constraints(inp, pairs)
        pair_rates = None if pairs is None else pairs.throughputs
        rates = job_rate_matrix(base.layout, throughputs, pair_rates, pairs)
        remaining = np.asarray(inp.remaining_steps, dtype=np.float64)
        # Jobs with nothing left or no reference throughput cannot be compared; the rest
        # enter the objective. A job outside it still gets capacity only if it is free.
        active = np.flatnonzero((remaining > 0) & (iso > 0))
        notes: tuple[str, ...] = ()
        if len(active) < inp.num_jobs:
            notes = (f"{inp.num_jobs - len(active)} job(s) without remaining work or reference",)
        if len(active) == 0:
            return empty_allocation(inp, notes)
        reference_time = done_s[active] + remaining[active] / iso[active]
        # cvxpy takes ~0.6 s to import: only the runs that use this policy pay for it.
        import cvxpy as cp

        # rem / rate = (rem / iso) / (rate / iso): with rates in units of the isolated
        # throughput every coefficient is O(1), which ECOS needs to reach the optimum (with
        # raw steps/s, up to 1e5 steps left and rates of 1-200, it stopped 0.1% above it).
        v = cp.Variable(base.layout.num_vars, nonneg=True)
        scaled_rates = rates[active].multiply(1.0 / iso[active][:, None]).tocsr()
        rate = scaled_rates @ v
        isolated_left = remaining[active] / iso[active]
        rho = cp.multiply(isolated_left / reference_time, cp.inv_pos(rate)) + (
            since_arrival[active] / reference_time
        )
        problem = cp.Problem(
            cp.Minimize(cp.max(rho)), [base.a_ub @ v <= base.b_ub, v <= base.upper]
        )
        failure = ""
        try:
            with warnings.catch_warnings():
                # cvxpy warns on OPTIMAL_INACCURATE; we record that in the notes instead.
                warnings.simplefilter("ignore", UserWarning)
                problem.solve(solver=self.conic_solver)
        except cp.error.SolverError as err:
            failure = f"{self.conic_solver} failed: {err}"
        if not failure and (
            problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or v.value is None
        ):
            failure = f"{self.conic_solver} status {problem.status}"
        if failure:
            isolated = Isolated().allocate(inp)
            return Allocation(
                inp.job_ids,
                inp.gpu_types,
                isolated.matrix,
                objective=float("nan"),
                notes=(*notes, f"{self.name}: {failure}; used the isolated allocation"),
                fallbacks=Fallbacks.of(Fallback.POLICY_SOLVE_FAILED),
            )
        fallbacks = Fallbacks()
        if problem.status == cp.OPTIMAL_INACCURATE:
            notes = (*notes, f"{self.conic_solver}: optimal_inaccurate")
            fallbacks = Fallbacks.of(Fallback.SOLVE_INACCURATE)
        values = np.clip(np.asarray(v.value, dtype=np.float64), 0.0, base.upper)
        return allocation_from_solution(
            inp, base.layout, values, pairs, float(problem.value), notes, fallbacks
        )

    def _rates(self, inp: PolicyInput) -> FloatArray:
        """Throughputs the policy sees: measured (``_perf``), or the reference type's rate
        on every type the job can use (agnostic, as Gavel's v100 rate everywhere)."""
        throughputs = np.asarray(inp.throughputs, dtype=np.float64)
        if self.heterogeneity_aware:
            return throughputs
        ref = (
            inp.gpu_types.index(self.reference_type) if self.reference_type in inp.gpu_types else 0
        )
        return np.asarray(np.where(throughputs > 0, throughputs[:, [ref]], 0.0), dtype=np.float64)
