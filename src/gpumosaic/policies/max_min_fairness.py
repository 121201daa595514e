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
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

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
    aggregate_identical_jobs,
    allocation_from_solution,
    build_base_constraints,
    empty_allocation,
    job_rate_matrix,
    pair_coefficients,
    proportional_rates,
    repair_onto_constraints,
    usable_pairs,
)
from gpumosaic.policies.lp_solve import ConicLp, LinearProgram, coo, solve, stack_rows
from gpumosaic.policies.max_min_conic import template_for, template_of

if TYPE_CHECKING:
    import scipy.sparse as sp


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
    import scipy.sparse as sp

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
    single, factor = normalized_single_rates(
        inp.throughputs, inp.scale_factors, inp.priority_weights, inp.capacity, heterogeneity_aware
    )
    if pairs is None:
        return single, None
    pair_rates = np.asarray(
        pairs.throughputs if heterogeneity_aware else pairs.throughputs > 0, dtype=np.float64
    )
    return single, pair_coefficients(PackedPairs(pairs.pairs, pair_rates), factor)


def normalized_single_rates(
    throughputs: FloatArray,
    scale_factors: npt.ArrayLike,
    priority_weights: npt.ArrayLike,
    capacity: FloatArray,
    heterogeneity_aware: bool,
) -> tuple[FloatArray, FloatArray]:
    """``normalized_rates`` of X over arrays, and the per-job factor sf / (w * prop)
    (compiled: ``row_classes.normalized_rows``)."""
    from gpumosaic.policies.row_classes import normalized_rows

    throughputs = np.ascontiguousarray(throughputs, dtype=np.float64)
    n = throughputs.shape[0]
    rates = np.empty(throughputs.shape)
    factor = np.empty(n)
    normalized_rows(
        throughputs,
        _proportional(throughputs, capacity, heterogeneity_aware),
        np.asarray(scale_factors, dtype=np.float64),
        np.asarray(priority_weights, dtype=np.float64),
        heterogeneity_aware,
        rates,
        factor,
    )
    return rates, factor


def _proportional(throughputs: FloatArray, capacity: FloatArray, aware: bool) -> FloatArray:
    """Each job's proportional throughput (``proportional_rates``), or 1s when the
    policy is not heterogeneity-aware (every rate counts as 1)."""
    if not aware:
        return np.ones(throughputs.shape[0])
    return proportional_rates(throughputs, capacity)


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
        if pairs is None and self.backend == "clarabel":
            return self._allocate_singles(inp)
        if pairs is None and self.aggregate:
            single, _ = normalized_rates(inp, self.heterogeneity_aware, None)
            classes = aggregate_identical_jobs(inp, single)
            if len(classes.counts) < inp.num_jobs:
                return classes.expand(inp, self._solve(classes.reduced, None))
        return self._solve(inp, pairs)

    def _allocate_singles(self, inp: PolicyInput) -> Allocation:
        """The hot path (no pairs, Clarabel): the LP from a cached template
        (``max_min_conic``), over job classes (``JobClasses``) without building the
        reduced PolicyInput. Same numbers, in the same order, as aggregating and solving
        through ``_solve``, so the same allocation. The keys, classes and class rows are
        two compiled passes (``row_classes.max_min_classes``, ``class_rows``)."""
        from gpumosaic.policies.row_classes import class_rows, max_min_classes

        aware = self.heterogeneity_aware
        throughputs = np.ascontiguousarray(inp.throughputs, dtype=np.float64)
        n, n_types = throughputs.shape
        scale = np.asarray(inp.scale_factors, dtype=np.float64)
        weight = np.asarray(inp.priority_weights, dtype=np.float64)
        demand = np.asarray(inp.demand, dtype=np.float64)
        if not self.aggregate:
            single, _ = normalized_single_rates(throughputs, scale, weight, inp.capacity, aware)
            x, level, notes = max_min_singles(throughputs, single, demand, inp.capacity)
            return Allocation(inp.job_ids, inp.gpu_types, x, objective=level, notes=notes)
        key = np.empty((n, 2 * n_types + 1))
        inverse = np.empty(n, dtype=np.int64)
        first = np.empty(n, dtype=np.int64)
        prop = _proportional(throughputs, inp.capacity, aware)
        classes = max_min_classes(
            throughputs, prop, scale, weight, demand, aware, key, inverse, first
        )
        rows = first[:classes]
        counts = np.bincount(inverse, minlength=classes)
        # The class rows: each class's first job, its own proportional throughput over
        # the class rows (as ``normalized_single_rates`` of them computes it).
        class_prop = _proportional(throughputs[rows], inp.capacity, aware)
        rates = np.empty((classes, n_types))
        class_demand = np.empty(classes)
        usable = np.empty((classes, n_types), dtype=np.bool_)
        runnable = class_rows(
            throughputs,
            class_prop,
            scale,
            weight,
            demand,
            aware,
            rows,
            counts,
            rates,
            class_demand,
            usable,
        )
        x, level, notes = _max_min_over(usable, runnable, rates, class_demand, inp.capacity)
        if classes < n:
            x = x[inverse]
            notes = (f"{classes} job class(es) for {n} jobs", *notes)
        return Allocation(inp.job_ids, inp.gpu_types, x, objective=level, notes=notes)

    def _solve(self, inp: PolicyInput, pairs: PackedPairs | None) -> Allocation:
        """The general path: any back end, with or without pairs."""
        import scipy.sparse as sp

        single, pair = normalized_rates(inp, self.heterogeneity_aware, pairs)
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


def max_min_singles(
    throughputs: FloatArray, rates: FloatArray, demand: FloatArray, capacity: FloatArray
) -> tuple[FloatArray, float, tuple[str, ...]]:
    """The max-min LP without pairs through Clarabel, over arrays: (X repaired onto the
    base constraints, the level z, notes). ``rates`` are the normalized (n, T) objective
    coefficients; X[j, t] is pinned to 0 where ``throughputs`` is 0."""
    runnable = np.asarray((rates > 0).any(axis=1), dtype=bool)
    return _max_min_over(throughputs > 0, runnable, rates, demand, capacity)


def _max_min_over(
    usable: npt.NDArray[np.bool_],
    runnable: npt.NDArray[np.bool_],
    rates: FloatArray,
    demand: FloatArray,
    capacity: FloatArray,
) -> tuple[FloatArray, float, tuple[str, ...]]:
    """``max_min_singles`` given where each job has throughput (``usable``) and which
    jobs enter the minimum (``runnable``: a positive rate somewhere)."""
    notes: tuple[str, ...] = ()
    if not runnable.all():
        notes = (f"{int((~runnable).sum())} job(s) have no throughput on any type",)
        if not runnable.any():
            return np.zeros(rates.shape), 0.0, notes
    template = template_of(usable, runnable)
    raw = template.solve(rates, demand, capacity)
    # Interior-point iterates sit a hair outside the bounds: clip, then scale any row or
    # type that still overshoots (``allocation_from_solution``).
    x = np.zeros(rates.size)
    x[template.keep] = raw[:-1].clip(0.0, 1.0)
    x, _ = repair_onto_constraints(
        x.reshape(rates.shape), np.zeros((0, rates.shape[1])), demand, capacity
    )
    return x, float(raw[-1]), notes


def singles_conic_lp(
    inp: PolicyInput, single: FloatArray, runnable: npt.NDArray[np.bool_]
) -> tuple[ConicLp, npt.NDArray[np.int64]]:
    """``max_min_program`` over ``build_base_constraints`` without pairs, as ``solve``
    hands it to Clarabel, from the template (``max_min_conic``); and the kept X columns
    (flat j * T + t)."""
    template = template_for(inp.throughputs, runnable)
    return template.problem(single, inp.demand, inp.capacity), template.keep
