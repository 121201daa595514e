"""Isolated shares: Gavel's ``IsolatedPolicy`` (``isolated``), also Gandiva's time shares.

What it computes, in Gavel's terms: the cluster split equally over the m jobs, each job's
share of type t being capacity_t / m GPUs, i.e. a time fraction capacity_t / (m * sf_j)
(here demand_j = num_gpu * gpu_milli / 1000 in place of sf_j). A job whose shares add up
to more than a whole time fraction (sum_t capacity_t / (m * demand_j) > 1) is scaled down
to exactly 1, on its own: the other jobs keep their shares (the capacity it leaves is not
redistributed). Nothing is optimised.

A job's throughput under this allocation is Themis' and Gavel's "isolated" throughput,
the reference of finish-time fairness (``finish_time_fairness``).

One difference from Gavel: a job gets no time on a type where it has no throughput (Gavel
gives it its share there too, which the job cannot use). Every job's throughput is the
same as under Gavel's allocation.

Gavel's ``ProportionalPolicy`` (every job the row capacity_t / sum(capacity), whatever m)
is not registered as a policy: it ignores scale factors and oversubscribes the cluster as
soon as the jobs ask for more GPUs than it has; it is the normalizer of the max-min
policies, ``lp_base.proportional_throughputs``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpumosaic.policies.base import Allocation, FloatArray, PolicyInput, PolicyTraits
from gpumosaic.policies.lp_base import empty_allocation


def isolated_shares(capacity: FloatArray, demand: FloatArray) -> FloatArray:
    """(m, n_types) time fractions capacity_t / (m * demand_j), each row scaled to <= 1.

    Demand-weighted use of type t is at most capacity_t (exactly, for rows not scaled).
    """
    m = len(demand)
    if m == 0:
        return np.zeros((0, len(capacity)))
    safe = np.where(demand > 0, demand, 1.0)
    shares = capacity[None, :] / m / safe[:, None]
    row_sums = shares.sum(axis=1)
    return np.asarray(shares / np.maximum(row_sums, 1.0)[:, None], dtype=np.float64)


def isolated_throughputs(inp: PolicyInput, throughputs: FloatArray) -> FloatArray:
    """Each job's throughput under Gavel's isolated allocation of ``inp``'s jobs."""
    shares = isolated_shares(np.asarray(inp.capacity, dtype=np.float64), inp.demand)
    return np.asarray((throughputs * shares).sum(axis=1), dtype=np.float64)


@dataclass(frozen=True, slots=True)
class Isolated:
    name: str = "isolated"

    @property
    def traits(self) -> PolicyTraits:
        return PolicyTraits()

    def allocate(self, inp: PolicyInput) -> Allocation:
        if inp.num_jobs == 0:
            return empty_allocation(inp)
        shares = isolated_shares(np.asarray(inp.capacity, dtype=np.float64), inp.demand)
        matrix = np.where(inp.throughputs > 0, shares, 0.0)
        return Allocation(inp.job_ids, inp.gpu_types, matrix, objective=float(matrix.sum()))
