"""Build the policy's view of the active jobs (PolicyInput) from the round mechanism's arrays.

Kept apart from the mechanism so that the arrays-to-policy translation is one small,
testable function: rows of the active jobs in, a PolicyInput (plus candidate pairs for
packing policies) out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import TypeVar

import numpy as np

from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.job import JobSpec
from gpumosaic.policies.base import PackedPairs, PolicyInput
from gpumosaic.types import FloatArray, IntArray
from gpumosaic.workloads.throughputs import GavelThroughputTable

T = TypeVar("T")

# Candidate partners per job for packed policies (Gavel uses every pair: O(N^2)).
DEFAULT_PAIR_PARTNERS = 4


@dataclass(frozen=True, slots=True)
class JobColumns:
    """Per-job columns the policy reads, gathered for the active rows."""

    specs: Sequence[JobSpec]
    rates: FloatArray  # (rows, T) isolated steps/s
    total_steps: FloatArray
    done_steps: FloatArray
    attained_s: FloatArray
    job_id: IntArray
    job_type: Sequence[str]
    entity: Sequence[str]
    scale: IntArray  # max(num_gpu, 1)
    gpu_demand: FloatArray
    priority_weight: FloatArray
    arrival_s: FloatArray
    slo_s: FloatArray  # NaN: none


def build_policy_input(
    rows: IntArray,
    cols: JobColumns,
    gpu_types: tuple[str, ...],
    capacity_gpus: FloatArray,
    now_s: float,
    packed: PackedPairs | None,
) -> PolicyInput:
    index = rows.tolist()
    slo = cols.slo_s[rows]
    return PolicyInput(
        job_ids=tuple(cols.job_id[rows].tolist()),
        job_types=pick(cols.job_type, index),
        gpu_types=gpu_types,
        throughputs=cols.rates[rows],
        scale_factors=cols.scale[rows],
        demand=cols.gpu_demand[rows],
        capacity=capacity_gpus,
        priority_weights=cols.priority_weight[rows],
        remaining_steps=cols.total_steps[rows] - cols.done_steps[rows],
        total_steps=cols.total_steps[rows],
        arrival_s=cols.arrival_s[rows],
        attained_service_s=cols.attained_s[rows],
        now_s=now_s,
        entities=pick(cols.entity, index),
        slo_s=slo if np.isfinite(slo).any() else None,
        packed=packed,
    )


def pick(values: Sequence[T], index: list[int]) -> tuple[T, ...]:
    """``tuple(values[i] for i in index)``, gathered in C (``operator.itemgetter``)."""
    if len(index) > 1:
        gathered: tuple[T, ...] = itemgetter(*index)(values)
        return gathered
    return tuple(values[i] for i in index)


def candidate_pairs(
    specs: Sequence[JobSpec],
    table: GavelThroughputTable,
    throughput_keys: Sequence[str | None],
    top_k: int,
) -> PackedPairs | None:
    """Candidate pairs among the whole-GPU jobs (a fractional job already shares its GPU
    by space; packing it again is not modelled). Rows index ``specs``."""
    from gpumosaic.policies.packing_pairs import build_packed_pairs

    whole = np.array(
        [s.gpu_milli == MILLI_PER_GPU and s.job_type in table.job_types for s in specs], bool
    )
    idx = np.flatnonzero(whole)
    if len(idx) < 2:
        return None
    keys = [(specs[i].job_type, max(specs[i].num_gpu, 1)) for i in idx.tolist()]
    known = [k for k in throughput_keys if k is not None]
    if not known:
        return None
    sub = build_packed_pairs(keys, table, known, top_k)
    if len(sub.pairs) == 0:
        return None
    # Spread the measured types back onto the cluster's types (0 where unmeasured).
    n_types = len(throughput_keys)
    rates = np.zeros((len(sub.pairs), n_types, 2))
    for t, key in enumerate(throughput_keys):
        if key is not None:
            rates[:, t, :] = sub.throughputs[:, known.index(key), :]
    return PackedPairs(idx[sub.pairs].astype(np.int64), rates)
