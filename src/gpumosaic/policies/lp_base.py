"""The base constraints every LP policy shares, over one flat variable vector.

Variables, in order: X (n_jobs x n_types, row-major): the time fraction job j runs alone
on type t; Y (n_pairs x n_types): the time fraction candidate pair k runs packed on
type t; then the policy's own scalars (e.g. the max-min level z).

Base constraints (Gavel's, with GPU demand instead of the scale factor):

- 0 <= X, Y <= 1; X[j, t] = 0 where job j has no throughput on type t; Y[k, t] = 0 where
  either job of pair k has no packed throughput on t or their scale factors differ;
- each job's time over its single and pair variables is at most 1;
- per type t: sum_j demand_j X[j, t] + sum_k demand_k Y[k, t] <= capacity_t, where
  demand = num_gpu * gpu_milli / 1000 and a pair occupies the GPUs of its larger member.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from gpumosaic.fallbacks import Fallbacks
from gpumosaic.policies.base import Allocation, FloatArray, PackedPairs, PolicyInput
from gpumosaic.policies.lp_solve import coo

if TYPE_CHECKING:
    import scipy.sparse as sp


@dataclass(frozen=True, slots=True)
class VariableLayout:
    """Where X, Y and the extra scalars sit in the flat variable vector."""

    n_jobs: int
    n_types: int
    n_pairs: int = 0
    n_extra: int = 0

    @property
    def n_single(self) -> int:
        return self.n_jobs * self.n_types

    @property
    def pair_offset(self) -> int:
        return self.n_single

    @property
    def extra_offset(self) -> int:
        return self.n_single + self.n_pairs * self.n_types

    @property
    def num_vars(self) -> int:
        return self.extra_offset + self.n_extra

    def split(self, values: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        """(X, Y, extras) views of a solution vector."""
        x = values[: self.n_single].reshape(self.n_jobs, self.n_types)
        y = values[self.pair_offset : self.extra_offset].reshape(self.n_pairs, self.n_types)
        return x, y, values[self.extra_offset :]


@dataclass(frozen=True, slots=True)
class BaseConstraints:
    """a_ub @ v <= b_ub (over all layout.num_vars columns; extras have zero coefficients)
    and 0 <= v <= upper for the X and Y parts of the layout."""

    layout: VariableLayout
    a_ub: sp.coo_array
    b_ub: FloatArray
    upper: FloatArray  # (n_single + n_pairs * n_types,)


def usable_pairs(inp: PolicyInput, use_pairs: bool) -> PackedPairs | None:
    """The input's candidate pairs when the policy packs, else None."""
    if not use_pairs or inp.packed is None or len(inp.packed.pairs) == 0:
        return None
    return inp.packed


def job_pair_incidence(n_jobs: int, pairs: PackedPairs | None) -> sp.csr_array:
    """(n_jobs, n_pairs) 0/1 matrix: job j is a member of pair k."""
    import scipy.sparse as sp

    if pairs is None:
        return sp.csr_array((n_jobs, 0))
    n_pairs = len(pairs.pairs)
    rows = pairs.pairs.reshape(-1)
    cols = np.repeat(np.arange(n_pairs), 2)
    return sp.csr_array((np.ones(2 * n_pairs), (rows, cols)), shape=(n_jobs, n_pairs))


def build_base_constraints(
    inp: PolicyInput, pairs: PackedPairs | None = None, n_extra: int = 0
) -> BaseConstraints:
    """The shared constraints, built from index arrays (no per-job Python loops).

    Rows 0..n-1: job time; rows n..n+T-1: capacity of each type.
    """
    n, t = inp.num_jobs, len(inp.gpu_types)
    n_pairs = 0 if pairs is None else len(pairs.pairs)
    layout = VariableLayout(n, t, n_pairs, n_extra)
    demand = np.asarray(inp.demand, dtype=np.float64)
    single_cols = np.arange(layout.n_single)
    single_job = single_cols // t
    single_type = single_cols % t
    rows = [single_job, n + single_type]
    cols = [single_cols, single_cols]
    vals = [np.ones(layout.n_single), demand[single_job]]
    if pairs is not None and n_pairs:
        pair_cols = layout.pair_offset + np.arange(n_pairs * t)
        pair_k = np.arange(n_pairs * t) // t
        pair_type = np.arange(n_pairs * t) % t
        # A pair's time counts against both members; it occupies its larger member's GPUs.
        rows += [pairs.pairs[pair_k, 0], pairs.pairs[pair_k, 1], n + pair_type]
        cols += [pair_cols, pair_cols, pair_cols]
        vals += [np.ones(n_pairs * t), np.ones(n_pairs * t), _pair_demand(demand, pairs)[pair_k]]
    a_ub = coo(
        np.concatenate(rows), np.concatenate(cols), np.concatenate(vals), (n + t, layout.num_vars)
    )
    b_ub = np.concatenate([np.ones(n), np.asarray(inp.capacity, dtype=np.float64)])
    upper_single = (inp.throughputs > 0).astype(np.float64).reshape(-1)
    upper_pair = _pair_upper(inp, pairs).reshape(-1)
    return BaseConstraints(layout, a_ub, b_ub, np.concatenate([upper_single, upper_pair]))


def _pair_demand(demand: FloatArray, pairs: PackedPairs | None) -> FloatArray:
    if pairs is None:
        return np.zeros(0)
    return np.maximum(demand[pairs.pairs[:, 0]], demand[pairs.pairs[:, 1]])


def _pair_upper(inp: PolicyInput, pairs: PackedPairs | None) -> FloatArray:
    if pairs is None:
        return np.zeros((0, len(inp.gpu_types)))
    a, b = pairs.pairs[:, 0], pairs.pairs[:, 1]
    same_scale = inp.scale_factors[a] == inp.scale_factors[b]
    measured = (pairs.throughputs[:, :, 0] > 0) & (pairs.throughputs[:, :, 1] > 0)
    mask: FloatArray = (measured & same_scale[:, None]).astype(np.float64)
    return mask


def job_rate_matrix(
    layout: VariableLayout, single: FloatArray, pair: FloatArray | None, pairs: PackedPairs | None
) -> sp.csr_array:
    """(n_jobs, num_vars) matrix R with (R @ v)[j] = sum_t single[j,t] X[j,t] + pair terms.

    ``pair[k, t, s]`` is the coefficient of Y[k, t] for the job on side s of pair k.
    """
    import scipy.sparse as sp

    n, t = layout.n_jobs, layout.n_types
    rows = [np.repeat(np.arange(n), t)]
    cols = [np.arange(layout.n_single)]
    vals = [single.reshape(-1)]
    if pairs is not None and pair is not None and layout.n_pairs:
        k_idx = np.repeat(np.arange(layout.n_pairs), t)
        t_idx = np.tile(np.arange(t), layout.n_pairs)
        col = layout.pair_offset + k_idx * t + t_idx
        for side in (0, 1):
            rows.append(pairs.pairs[k_idx, side])
            cols.append(col)
            vals.append(pair[:, :, side].reshape(-1))
    matrix = coo(
        np.concatenate(rows), np.concatenate(cols), np.concatenate(vals), (n, layout.num_vars)
    )
    return sp.csr_array(matrix)


def proportional_throughputs(inp: PolicyInput, throughputs: FloatArray) -> FloatArray:
    """Each job's throughput under the equal ("proportional") share of the cluster.

    Gavel normalizes by this: every job gets the same share capacity_t / sum(capacity) of
    every type, so it is the capacity-weighted mean of the job's throughputs.
    """
    return proportional_rates(throughputs, inp.capacity)


def proportional_rates(throughputs: FloatArray, capacity: FloatArray) -> FloatArray:
    """``proportional_throughputs`` over arrays: (n_jobs, n_types) rates, (n_types,) GPUs."""
    capacity = np.asarray(capacity, dtype=np.float64)
    total = capacity.sum()
    if total <= 0:
        return np.zeros(throughputs.shape[0])
    return np.asarray(throughputs @ (capacity / total), dtype=np.float64)


def weighted_scale(inp: PolicyInput) -> FloatArray:
    """scale_factor / priority_weight per job: Gavel's per-job objective multiplier."""
    return scale_over_weight(inp.scale_factors, inp.priority_weights)


def scale_over_weight(scale_factors: npt.ArrayLike, priority_weights: npt.ArrayLike) -> FloatArray:
    """``weighted_scale`` over arrays."""
    weights = np.asarray(priority_weights, dtype=np.float64)
    return np.asarray(scale_factors, dtype=np.float64) / np.where(weights > 0, weights, 1.0)


def pair_coefficients(pairs: PackedPairs | None, per_job: FloatArray) -> FloatArray | None:
    """Pair throughputs times the per-job factor of the job on each side."""
    if pairs is None:
        return None
    factor = np.stack([per_job[pairs.pairs[:, 0]], per_job[pairs.pairs[:, 1]]], axis=1)
    return np.asarray(pairs.throughputs * factor[:, None, :], dtype=np.float64)


def allocation_from_solution(
    inp: PolicyInput,
    layout: VariableLayout,
    values: FloatArray,
    pairs: PackedPairs | None,
    objective: float,
    notes: tuple[str, ...] = (),
    fallbacks: Fallbacks | None = None,
) -> Allocation:
    """Wrap a solution vector as an Allocation, exactly feasible.

    Interior-point solutions can overshoot a constraint by ~1e-8; clip into [0, 1] (as
    Gavel does) and scale down any row or GPU type that still overshoots, so that the
    mechanism can rely on the base constraints holding exactly.
    """
    x, y, _ = layout.split(values)
    x, y = repair_feasibility(inp, np.clip(x, 0.0, 1.0), np.clip(y, 0.0, 1.0), pairs)
    return Allocation(
        job_ids=inp.job_ids,
        gpu_types=inp.gpu_types,
        matrix=x,
        pair_matrix=None if pairs is None else y,
        packed=pairs,
        objective=objective,
        notes=notes,
        fallbacks=fallbacks or Fallbacks(),
    )


def empty_allocation(inp: PolicyInput, notes: tuple[str, ...] = ()) -> Allocation:
    return Allocation(
        job_ids=inp.job_ids,
        gpu_types=inp.gpu_types,
        matrix=np.zeros((inp.num_jobs, len(inp.gpu_types))),
        objective=0.0,
        notes=notes,
    )


def repair_feasibility(
    inp: PolicyInput, x: FloatArray, y: FloatArray, pairs: PackedPairs | None
) -> tuple[FloatArray, FloatArray]:
    """Scale rows with time > 1 and types over capacity down onto the constraints.

    A scale of exactly 1 leaves a value unchanged, so rows and types within their limits
    (the usual case) skip the multiplication."""
    return repair_onto_constraints(x, y, inp.demand, inp.capacity, pairs)


def repair_onto_constraints(
    x: FloatArray,
    y: FloatArray,
    demand: FloatArray,
    capacity: FloatArray,
    pairs: PackedPairs | None = None,
) -> tuple[FloatArray, FloatArray]:
    """``repair_feasibility`` over arrays: x (n_jobs, n_types), y (n_pairs, n_types),
    demand (n_jobs,) and capacity (n_types,) in GPUs. Scaling makes new arrays; where
    nothing overshoots, ``x`` and ``y`` themselves come back."""
    with_pairs = pairs is not None and len(y) > 0
    time = x.sum(axis=1)
    if with_pairs:
        assert pairs is not None
        time = time + job_pair_incidence(x.shape[0], pairs) @ y.sum(axis=1)
    if not time.max(initial=0.0) <= 1.0:
        row_scale = 1.0 / np.maximum(time, 1.0)
        x = x * row_scale[:, None]
        if with_pairs:
            assert pairs is not None
            y = y * np.minimum(row_scale[pairs.pairs[:, 0]], row_scale[pairs.pairs[:, 1]])[:, None]
    demand = np.asarray(demand, dtype=np.float64)
    used = demand @ x
    if with_pairs:
        used = used + _pair_demand(demand, pairs) @ y
    capacity = np.asarray(capacity, dtype=np.float64)
    over = used > capacity
    if not over.any():
        return x, y
    type_scale = np.where(over, capacity / np.where(used > 0, used, 1.0), 1.0)
    return x * type_scale[None, :], y * type_scale[None, :]


@dataclass(frozen=True, slots=True)
class JobClasses:
    """Jobs that are interchangeable in an LP, merged into one row each.

    For a symmetric LP (identical objective coefficients, bounds and demand), some
    optimal allocation gives identical jobs identical rows, so one row per class with
    the class's total demand (count x demand) and a per-job time limit of 1 solves the
    same problem. With Gavel's 26 job types the LP then has at most a few dozen rows
    whatever the number of jobs. The optimum is the same; among equally good
    allocations, identical jobs get identical shares.
    """

    reduced: PolicyInput
    class_of_job: npt.NDArray[np.int64]
    counts: npt.NDArray[np.int64]

    def expand(self, inp: PolicyInput, alloc: Allocation) -> Allocation:
        return Allocation(
            job_ids=inp.job_ids,
            gpu_types=inp.gpu_types,
            matrix=alloc.matrix[self.class_of_job],
            objective=alloc.objective,
            notes=(f"{len(self.counts)} job class(es) for {inp.num_jobs} jobs", *alloc.notes),
            fallbacks=alloc.fallbacks,
        )


def aggregate_identical_jobs(inp: PolicyInput, key: FloatArray) -> JobClasses:
    """Group jobs whose ``key`` rows (what the LP sees of them) and demand are equal."""
    inverse, rows, counts = group_identical_rows(job_class_key(inp, key))
    reduced = replace(
        inp,
        job_ids=tuple(range(len(rows))),
        job_types=tuple(inp.job_types[r] for r in rows),
        throughputs=inp.throughputs[rows],
        scale_factors=inp.scale_factors[rows],
        demand=inp.demand[rows] * counts,
        priority_weights=inp.priority_weights[rows],
        remaining_steps=inp.remaining_steps[rows],
        total_steps=inp.total_steps[rows],
        arrival_s=inp.arrival_s[rows],
        attained_service_s=inp.attained_service_s[rows],
        entities=tuple(inp.entities[r] for r in rows) if inp.entities else (),
        slo_s=None if inp.slo_s is None else inp.slo_s[rows],
        packed=None,
    )
    return JobClasses(reduced, inverse, counts)


def job_class_key(inp: PolicyInput, key: FloatArray) -> FloatArray:
    """The rows ``aggregate_identical_jobs`` compares: ``key``, where each job can run, and
    its demand."""
    return np.ascontiguousarray(
        np.column_stack([key, inp.throughputs > 0, inp.demand]), dtype=np.float64
    )


def group_identical_rows(
    key: FloatArray,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Classes of bitwise-equal rows of a C-contiguous float64 ``key``, numbered by first
    appearance: (class of each row, first row of each class, rows per class)."""
    from gpumosaic.policies.row_classes import row_classes

    n = key.shape[0]
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    words = np.ascontiguousarray(key, dtype=np.float64).view(np.uint64).reshape(n, -1)
    inverse = np.empty(n, dtype=np.int64)
    first = np.empty(n, dtype=np.int64)
    classes = row_classes(words, inverse, first)
    return inverse, first[:classes], np.bincount(inverse, minlength=classes)
