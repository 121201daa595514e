"""Isolated (equal) shares: Gavel's ``isolated`` policy and Gandiva's time shares.

Every one of the m jobs gets capacity_t / m of each type t, divided by its demand so
that demand-weighted use of type t is exactly capacity_t; rows are then scaled down
uniformly so that no job exceeds a time fraction of 1. (Gavel divides by the largest
row sum even when it is below 1, which scales shares up past the capacity; we only
scale down.) A job gets nothing on a type where it has no throughput.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpumosaic.policies.base import Allocation, FloatArray, PolicyInput, PolicyTraits
from gpumosaic.policies.lp_base import empty_allocation


def equal_shares(capacity: FloatArray, demand: FloatArray, per_row: bool = False) -> FloatArray:
    """(m, n_types) shares capacity_t / (m * demand_i), scaled so rows are <= 1.

    ``per_row``: scale each row on its own (Gandiva) instead of all rows by the largest.
    """
    m = len(demand)
    if m == 0:
        return np.zeros((0, len(capacity)))
    safe = np.where(demand > 0, demand, 1.0)
    shares = capacity[None, :] / m / safe[:, None]
    row_sums = shares.sum(axis=1)
    if per_row:
        return np.asarray(shares / np.maximum(row_sums, 1.0)[:, None], dtype=np.float64)
    return np.asarray(shares / max(float(row_sums.max()), 1.0), dtype=np.float64)


@dataclass(frozen=True, slots=True)
class Isolated:
    name: str = "isolated"

    @property
    def traits(self) -> PolicyTraits:
        return PolicyTraits()

    def allocate(self, inp: PolicyInput) -> Allocation:
        if inp.num_jobs == 0:
            return empty_allocation(inp)
        shares = equal_shares(np.asarray(inp.capacity, dtype=np.float64), inp.demand)
        matrix = np.where(inp.throughputs > 0, shares, 0.0)
        return Allocation(inp.job_ids, inp.gpu_types, matrix, objective=float(matrix.sum()))
