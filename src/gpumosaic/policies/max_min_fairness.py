"""Max-min fairness (Gavel's ``max_min_fairness``, ``_perf`` and ``_packed``).

What it optimises, in Gavel's terms (``MaxMinFairnessPolicyWithPerf``): over the base
constraints, maximize min_j  sf_j / (w_j * prop_j) * sum_t thr[j, t] X[j, t], where prop_j
is the job's throughput under Gavel's ``ProportionalPolicy`` share capacity_t /
sum(capacity) of every type (``proportional_throughputs``), sf_j its scale factor and
w_j its priority weight. At the optimum a job with twice the weight gets twice the
normalized throughput, unless it is limited by something else (a time fraction of 1).

``max_min_fairness`` (LAS, Gavel's ``MaxMinFairnessPolicy``) is the same LP with every
throughput set to 1 (so prop_j = 1 and each job's objective is sf_j / w_j times its time
share), except that X stays 0 on types where the job has no throughput (Gavel gives it
time there that it cannot use). A job with no throughput on any type is left out of the
minimum (noted): it would pin the objective at 0.

``_packed`` adds the candidate pairs of ``PolicyInput.packed``: a job's effective
throughput also counts Y[k, t] times its rate inside pair k. Gavel normalizes pair rates
a second time by the job's summed isolated throughputs; we use the ``_perf`` normalization
so that ``_packed`` without pairs is exactly ``_perf``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from gpumosaic.policies.base import (
    Allocation,
    FloatArray,
    PackedPairs,
    PolicyInput,
    PolicyTraits,
    lp_traits,
)
from gpumosaic.policies.lp_base import (
    BaseConstraints,
    VariableLayout,
    aggregate_identical_jobs,
    allocation_from_solution,
    build_base_constraints,
    empty_allocation,
    job_rate_matrix,
    pair_coefficients,
    proportional_throughputs,
    usable_pairs,
    weighted_scale,
)
from gpumosaic.policies.lp_solve import (
    ConicLp,
    LinearProgram,
    coo,
    solve,
    solve_conic,
    stack_rows,
)


def max_min_program(
    base: BaseConstraints,
    objective_rates: sp.csr_array,
    objective_offsets: FloatArray | None = None,
    floor_rates: sp.csr_array | None = None,
    floors: FloatArray | None = None,
) -> LinearProgram:
    """maximize z  s.t. base, objective_rates @ v - offsets >= z, floor_rates @ v >= floors.

    The layout of ``base`` must reserve its last extra variable for z.
    """
    layout = base.layout
    n_obj = objective_rates.shape[0]
    offsets = np.zeros(n_obj) if objective_offsets is None else objective_offsets
    # Rows z - rates_j @ v <= -offset_j: the z entry and the negated rates share each row.
    rates = sp.coo_array(objective_rates)
    objective_rows = coo(
        np.concatenate([np.arange(n_obj), rates.row]),
        np.concatenate([np.full(n_obj, layout.num_vars - 1), rates.col]),
        np.concatenate([np.ones(n_obj), -rates.data]),
        (n_obj, layout.num_vars),
    )
    blocks = [base.a_ub, objective_rows]
    rhs = [base.b_ub, -offsets]
    if floor_rates is not None and floors is not None and floor_rates.shape[0]:
        fr = sp.coo_array(floor_rates)
        blocks.append(coo(fr.row, fr.col, -fr.data, fr.shape))
        rhs.append(-floors)
    c = np.zeros(layout.num_vars)
    c[-1] = -1.0
    n_extra = layout.num_vars - base.upper.shape[0]
    return LinearProgram(
        c=c,
        a_ub=stack_rows(blocks, layout.num_vars),
        b_ub=np.concatenate(rhs),
        lower=np.concatenate([np.zeros(base.upper.shape[0]), np.full(n_extra, -np.inf)]),
        upper=np.concatenate([base.upper, np.full(n_extra, np.inf)]),
    )


def normalized_rates(
    inp: PolicyInput, heterogeneity_aware: bool, pairs: PackedPairs | None
) -> tuple[FloatArray, FloatArray | None]:
    """Per-job objective coefficients for X and (if packing) Y: thr * sf / (w * prop)."""
    if heterogeneity_aware:
        throughputs = np.asarray(inp.throughputs, dtype=np.float64)
        prop = proportional_throughputs(inp, throughputs)
    else:
        throughputs = (inp.throughputs > 0).astype(np.float64)
        prop = np.ones(inp.num_jobs)
    factor = weighted_scale(inp) / np.where(prop > 0, prop, 1.0)
    factor = np.where(prop > 0, factor, 0.0)
    single = throughputs * factor[:, None]
    if pairs is None:
        return single, None
    pair_rates = np.asarray(
        pairs.throughputs if heterogeneity_aware else pairs.throughputs > 0, dtype=np.float64
    )
    return single, pair_coefficients(PackedPairs(pairs.pairs, pair_rates), factor)


@dataclass(frozen=True, slots=True)
class MaxMinFairness:
    """Weighted max-min fairness over normalized throughputs (see the module docstring)."""

    name: str = "max_min_fairness_perf"
    heterogeneity_aware: bool = True
    use_pairs: bool = False
    backend: str = "clarabel"
    aggregate: bool = True  # merge identical jobs (``JobClasses``) when not packing

    @property
    def traits(self) -> PolicyTraits:
        return lp_traits(self.heterogeneity_aware, self.use_pairs)

    def allocate(self, inp: PolicyInput) -> Allocation:
        if inp.num_jobs == 0:
            return empty_allocation(inp)
        pairs = usable_pairs(inp, self.use_pairs)
        if pairs is None and self.aggregate:
            single, _ = normalized_rates(inp, self.heterogeneity_aware, None)
            classes = aggregate_identical_jobs(inp, single)
            if len(classes.counts) < inp.num_jobs:
                return classes.expand(inp, self._solve(classes.reduced, None))
        return self._solve(inp, pairs)

    def _solve(self, inp: PolicyInput, pairs: PackedPairs | None) -> Allocation:
        single, pair = normalized_rates(inp, self.heterogeneity_aware, pairs)
        if pairs is None and self.backend == "clarabel":
            return self._solve_singles(inp, single)
        base = build_base_constraints(inp, pairs, n_extra=1)
        rates = job_rate_matrix(base.layout, single, pair, pairs)
        # A job that can run nowhere would pin the minimum at 0; leave it out and say so.
        runnable = np.asarray((single > 0).any(axis=1), dtype=bool)
        if pair is not None and pairs is not None:
            paired = pairs.pairs[(pair > 0).any(axis=(1, 2))]
            runnable[paired.reshape(-1)] = True
        notes: tuple[str, ...] = ()
        if not runnable.all():
            notes = (f"{int((~runnable).sum())} job(s) have no throughput on any type",)
        if not runnable.any():
            return empty_allocation(inp, notes)
        objective_rates = rates if runnable.all() else sp.csr_array(rates[np.flatnonzero(runnable)])
        program = max_min_program(base, objective_rates)
        solution = solve(program, self.backend)
        level = float(solution.values[-1])
        return allocation_from_solution(inp, base.layout, solution.values, pairs, level, notes)

    def _solve_singles(self, inp: PolicyInput, single: FloatArray) -> Allocation:
        """The LP without pairs, built in Clarabel's form directly (``singles_conic_lp``:
        the same input, so the same solution, as the general path through ``solve``)."""
        runnable = np.asarray((single > 0).any(axis=1), dtype=bool)
        notes: tuple[str, ...] = ()
        if not runnable.all():
            notes = (f"{int((~runnable).sum())} job(s) have no throughput on any type",)
        if not runnable.any():
            return empty_allocation(inp, notes)
        problem, keep = singles_conic_lp(inp, single, runnable)
        raw = solve_conic(problem)
        n_single = single.size
        values = np.zeros(n_single + 1)
        values[keep] = np.clip(raw[:-1], 0.0, 1.0)
        values[-1] = raw[-1]
        layout = VariableLayout(inp.num_jobs, len(inp.gpu_types), 0, 1)
        return allocation_from_solution(inp, layout, values, None, float(raw[-1]), notes)


def singles_conic_lp(
    inp: PolicyInput, single: FloatArray, runnable: npt.NDArray[np.bool_]
) -> tuple[ConicLp, npt.NDArray[np.int64]]:
    """``max_min_program`` over ``build_base_constraints`` without pairs, as ``solve``
    hands it to Clarabel (``lp_solve.clarabel_form`` after substituting out the X[j, t]
    pinned to 0), built straight from index arrays; and the kept X columns (flat j * T + t).

    Variables: the kept X columns in flat order, then z. Rows: job time (n), type capacity
    (T), one max-min row per runnable job (z - rates . x <= 0), then x <= 1 and -x <= 0
    per kept column. Each X column holds, rows ascending: its job's time row (1), its
    type's capacity row (demand), its job's max-min row (-rate; runnable jobs only), its
    upper-bound row (1) and its lower-bound row (-1); the z column holds 1 in every
    max-min row.
    """
    n, n_types = single.shape
    keep = np.flatnonzero(inp.throughputs.reshape(-1) > 0)
    k = len(keep)
    job, typ = np.divmod(keep, n_types)
    n_obj = int(runnable.sum())
    obj_row = np.cumsum(runnable) - 1  # max-min row (within the block) of each runnable job
    demand = np.asarray(inp.demand, dtype=np.float64)
    first_obj = n + n_types
    first_upper = first_obj + n_obj
    first_lower = first_upper + k
    ordinal = np.arange(k)
    rows = np.column_stack(
        [job, n + typ, first_obj + obj_row[job], first_upper + ordinal, first_lower + ordinal]
    )
    vals = np.column_stack(
        [np.ones(k), demand[job], -single.reshape(-1)[keep], np.ones(k), -np.ones(k)]
    )
    present = np.ones((k, 5), dtype=bool)
    present[:, 2] = runnable[job]
    per_col = present.sum(axis=1)
    indptr = np.zeros(k + 2, dtype=np.int32)
    np.cumsum(per_col, out=indptr[1 : k + 1])
    indptr[k + 1] = indptr[k] + n_obj
    indices = np.concatenate([rows[present], first_obj + np.arange(n_obj)]).astype(np.int32)
    data = np.concatenate([vals[present], np.ones(n_obj)])
    q = np.zeros(k + 1)
    q[-1] = -1.0
    b = np.concatenate(
        [
            np.ones(n),
            np.asarray(inp.capacity, dtype=np.float64),
            -np.zeros(n_obj),
            np.ones(k),
            -np.zeros(k),
        ]
    )
    return ConicLp(q, indptr, indices, data, b), keep
