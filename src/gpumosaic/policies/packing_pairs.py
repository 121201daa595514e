"""Candidate job pairs for space sharing: the top-k partners of each job.

Gavel's packed LP has a variable for every pair of jobs (O(N^2)): 6 s at 256 jobs and out
of memory at 2,048. Most pairs are useless (packing slows both jobs down), so we keep,
for each job, only its ``top_k`` partners by normalized packed throughput
(rate_a / isolated_a + rate_b / isolated_b, best over GPU types); the LP then has
O(N * top_k) pair variables.

Pairs need equal scale factors (a pair shares the same set of GPUs). Gavel's table only
measures single-GPU pairs; for multi-GPU jobs of equal scale factor we scale the
single-GPU interference: rate_a(sf) = isolated_a(sf) * rate_a(1) / isolated_a(1)
(``scale_multi_gpu``; the assumption is that packing slows a data-parallel job by the
same ratio on each of its GPUs).

Among equally good partners (jobs of the same type), a job prefers the ones that follow
it in row order (cyclically), so that partners spread over the jobs of the best type
instead of all jobs piling onto its first instance. Deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpumosaic.policies.base import FloatArray, PackedPairs
from gpumosaic.workloads.throughputs import GavelThroughputTable

JobKey = tuple[str, int]
_BLOCK_ROWS = 512


def pair_rates_by_key(
    keys: Sequence[JobKey],
    table: GavelThroughputTable,
    gpu_types: Sequence[str],
    scale_multi_gpu: bool = True,
) -> FloatArray:
    """(K, K, T, 2) packed rates of key a with key b on each type; 0 = cannot pack."""
    n_keys, n_types = len(keys), len(gpu_types)
    rates = np.zeros((n_keys, n_keys, n_types, 2))
    for i, (type_a, sf_a) in enumerate(keys):
        for j, (type_b, sf_b) in enumerate(keys):
            if sf_a != sf_b:
                continue
            for t, gpu in enumerate(gpu_types):
                pair = _single_gpu_pair(table, type_a, type_b, gpu)
                if pair is None:
                    continue
                if sf_a == 1:
                    rates[i, j, t] = pair
                elif scale_multi_gpu and _has(table, keys[i], gpu) and _has(table, keys[j], gpu):
                    rates[i, j, t, 0] = _scaled(table, type_a, sf_a, gpu, pair[0])
                    rates[i, j, t, 1] = _scaled(table, type_b, sf_b, gpu, pair[1])
    return rates


def build_packed_pairs(
    job_keys: Sequence[JobKey],
    table: GavelThroughputTable,
    gpu_types: Sequence[str],
    top_k: int = 4,
    *,
    min_gain: float = 0.0,
    scale_multi_gpu: bool = True,
) -> PackedPairs:
    """Candidate pairs over job rows (``job_keys[j] = (job type, scale factor)``).

    ``min_gain``: drop pairs whose best normalized packed throughput is at most this
    (0 keeps every measured pair; 1.0 keeps only pairs that beat running alone).
    """
    n = len(job_keys)
    unique = list(dict.fromkeys(job_keys))
    key_index = np.array([unique.index(k) for k in job_keys], dtype=np.int64)
    rates = pair_rates_by_key(unique, table, gpu_types, scale_multi_gpu)
    score = _normalized_score(unique, table, gpu_types, rates)
    if n < 2 or top_k <= 0:
        return PackedPairs(np.zeros((0, 2), dtype=np.int64), np.zeros((0, len(gpu_types), 2)))
    chosen: list[np.ndarray] = []
    k = min(top_k, n - 1)
    never = np.iinfo(np.int64).max
    for r0 in range(0, n, _BLOCK_ROWS):
        rows = np.arange(r0, min(r0 + _BLOCK_ROWS, n))
        s = score[key_index[rows][:, None], key_index[None, :]]
        quantized = np.round(s * 1e6).astype(np.int64)
        offset = (np.arange(n)[None, :] - rows[:, None]) % n
        composite = -quantized * (n + 1) + offset
        composite[(s <= min_gain) | (offset == 0)] = never
        part = np.argpartition(composite, k - 1, axis=1)[:, :k]
        valid = np.take_along_axis(composite, part, axis=1) < never
        a = np.broadcast_to(rows[:, None], part.shape)[valid]
        b = part[valid]
        chosen.append(np.column_stack([np.minimum(a, b), np.maximum(a, b)]))
    pairs = np.unique(np.concatenate(chosen), axis=0) if chosen else np.zeros((0, 2))
    pairs = pairs.astype(np.int64).reshape(-1, 2)
    throughputs = rates[key_index[pairs[:, 0]], key_index[pairs[:, 1]]]
    return PackedPairs(pairs, np.asarray(throughputs, dtype=np.float64))


def _normalized_score(
    keys: Sequence[JobKey], table: GavelThroughputTable, gpu_types: Sequence[str], rates: FloatArray
) -> FloatArray:
    """(K, K) best-over-types rate_a / isolated_a + rate_b / isolated_b (0 if unpackable)."""
    iso = np.array(
        [
            [table.isolated(jt, sf, g) if _has(table, (jt, sf), g) else 0.0 for g in gpu_types]
            for jt, sf in keys
        ]
    )
    safe = np.where(iso > 0, iso, np.inf)
    norm_a = rates[:, :, :, 0] / safe[:, None, :]
    norm_b = rates[:, :, :, 1] / safe[None, :, :]
    both = (rates[:, :, :, 0] > 0) & (rates[:, :, :, 1] > 0)
    return np.asarray(np.where(both, norm_a + norm_b, 0.0).max(axis=2), dtype=np.float64)


def _single_gpu_pair(
    table: GavelThroughputTable, type_a: str, type_b: str, gpu: str
) -> tuple[float, float] | None:
    pair = table.packed(type_a, 1, type_b, 1, gpu)
    if pair is None:
        reverse = table.packed(type_b, 1, type_a, 1, gpu)
        pair = None if reverse is None else (reverse[1], reverse[0])
    return pair


def _has(table: GavelThroughputTable, key: JobKey, gpu: str) -> bool:
    return table.has(key[0], key[1], gpu)


def _scaled(table: GavelThroughputTable, job_type: str, sf: int, gpu: str, rate_1: float) -> float:
    if not table.has(job_type, 1, gpu):
        return 0.0
    iso_1 = table.isolated(job_type, 1, gpu)
    return 0.0 if iso_1 <= 0 else table.isolated(job_type, sf, gpu) * rate_1 / iso_1
