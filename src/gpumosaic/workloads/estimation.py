"""Throughput estimation for job types or GPU types that the table does not measure.

Gavel's estimator: profile a new job on a few configurations only (partial profiling),
fill in the rest of the (jobs x configurations) throughput matrix by matrix completion,
and/or take the measured throughputs of the nearest reference job type by cosine
distance over the profiled entries. Configurations are GPU types, optionally crossed with
a co-located partner job type (packed throughputs), as in Gavel's paper.

The completion works in log space, where throughputs are close to additive
(log rate = job effect + GPU effect + a low-rank interaction): it fits row and column
effects on the observed entries, then fills the residual by iterative rank-``rank`` SVD
imputation (hard-impute). Missing entries are NaN everywhere.

``tests/workloads/test_estimation.py`` hides known entries of Gavel's table and reports
the errors of both methods.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gpumosaic.types import FloatArray
from gpumosaic.workloads.throughputs import GavelThroughputTable

ISOLATED = "alone"


@dataclass(frozen=True, slots=True)
class ReferenceMatrix:
    """Measured rates: rows = (job type, scale factor), columns = (GPU type, partner)."""

    rows: tuple[tuple[str, int], ...]
    columns: tuple[tuple[str, str], ...]  # (gpu type, partner job type or ISOLATED)
    values: FloatArray  # NaN = not measured


def gavel_reference_matrix(
    table: GavelThroughputTable,
    gpu_types: Sequence[str] = ("v100", "p100", "k80"),
    scale_factor: int = 1,
    with_packed: bool = True,
) -> ReferenceMatrix:
    """Gavel's table as a matrix: isolated rates, and (single-GPU) packed rates per partner."""
    rows = tuple(
        (jt, scale_factor) for jt in table.job_types if table.has(jt, scale_factor, gpu_types[0])
    )
    partners: list[str] = [ISOLATED]
    if with_packed and scale_factor == 1:
        partners += [jt for jt, _ in rows]
    columns = tuple((g, p) for g in gpu_types for p in partners)
    values = np.full((len(rows), len(columns)), np.nan)
    for i, (jt, sf) in enumerate(rows):
        for c, (g, partner) in enumerate(columns):
            if partner == ISOLATED:
                if table.has(jt, sf, g):
                    values[i, c] = table.isolated(jt, sf, g)
                continue
            pair = table.packed(jt, sf, partner, sf, g)
            if pair is not None and pair[0] > 0:
                values[i, c] = pair[0]
    return ReferenceMatrix(rows, columns, values)


def complete_matrix(
    observed: FloatArray, rank: int = 3, iterations: int = 300, tol: float = 1e-7
) -> FloatArray:
    """Fill the NaN entries of a positive matrix (log-space effects + rank-r residual)."""
    if (observed[np.isfinite(observed)] <= 0).any():
        raise ValueError("complete_matrix needs positive observed entries")
    mask = np.isfinite(observed)
    if not mask.any():
        raise ValueError("complete_matrix needs at least one observed entry")
    logs = np.where(mask, np.log(np.where(mask, observed, 1.0)), 0.0)
    row_eff, col_eff = _additive_effects(logs, mask)
    residual = np.where(mask, logs - row_eff[:, None] - col_eff[None, :], 0.0)
    estimate = np.zeros_like(residual)
    r = max(0, min(rank, min(residual.shape) - 1))
    for _ in range(iterations if r > 0 else 0):
        filled = np.where(mask, residual, estimate)
        u, s, vt = np.linalg.svd(filled, full_matrices=False)
        new = (u[:, :r] * s[:r]) @ vt[:r]
        change = float(np.linalg.norm(new - estimate)) / max(float(np.linalg.norm(new)), 1e-12)
        estimate = new
        if change < tol:
            break
    completed = np.exp(row_eff[:, None] + col_eff[None, :] + estimate)
    return np.asarray(np.where(mask, observed, completed), dtype=np.float64)


def _additive_effects(
    logs: FloatArray, mask: np.ndarray, sweeps: int = 50
) -> tuple[FloatArray, FloatArray]:
    """Row and column effects of an additive model fitted to the observed entries."""
    row = np.zeros(logs.shape[0])
    col = np.zeros(logs.shape[1])
    counts_r = np.maximum(mask.sum(axis=1), 1)
    counts_c = np.maximum(mask.sum(axis=0), 1)
    for _ in range(sweeps):
        row = np.where(mask, logs - col[None, :], 0.0).sum(axis=1) / counts_r
        col = np.where(mask, logs - row[:, None], 0.0).sum(axis=0) / counts_c
    return row, col


def cosine_nearest(partial: FloatArray, reference: FloatArray) -> int:
    """Row of ``reference`` closest to ``partial`` by cosine similarity on shared entries."""
    best, best_sim = -1, -np.inf
    for i, row in enumerate(reference):
        shared = np.isfinite(partial) & np.isfinite(row)
        if not shared.any():
            continue
        a, b = partial[shared], row[shared]
        sim = float(a @ b) / max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-12)
        if sim > best_sim:
            best, best_sim = i, sim
    if best < 0:
        raise ValueError("no reference row shares a profiled entry with the new job")
    return best


@dataclass(frozen=True, slots=True)
class RowEstimate:
    completed: FloatArray  # matrix completion
    nearest: FloatArray  # the nearest reference row, scaled to the profiled entries
    nearest_row: int
    nearest_scale: float


def estimate_row(reference: FloatArray, partial: FloatArray, rank: int = 2) -> RowEstimate:
    """Estimate a new job's row from its profiled entries (NaN = not profiled).

    Profiled entries are returned as measured by both methods.
    """
    stacked = np.vstack([reference, partial[None, :]])
    completed = complete_matrix(stacked, rank=rank)[-1]
    idx = cosine_nearest(partial, reference)
    # Cosine distance matches the shape of the row, not its level (a larger batch size
    # runs fewer steps/s everywhere), so scale the reference by the median ratio on the
    # profiled entries; Gavel uses the reference's rates as they are.
    shared = np.isfinite(partial) & np.isfinite(reference[idx])
    scale = float(np.median(partial[shared] / reference[idx][shared]))
    nearest = np.where(np.isfinite(reference[idx]), scale * reference[idx], completed)
    nearest = np.where(np.isfinite(partial), partial, nearest)
    return RowEstimate(completed, nearest, idx, scale)


def estimate_new_gpu_type(
    isolated: FloatArray, profiled_column: FloatArray, rank: int = 1
) -> FloatArray:
    """Fill a new GPU type's column (e.g. T4, A10) from a few profiled job types.

    ``isolated``: (n_jobs, n_known_types) measured rates; ``profiled_column``: (n_jobs,)
    with NaN for job types not profiled on the new type.
    """
    matrix = np.column_stack([isolated, profiled_column])
    return np.asarray(complete_matrix(matrix, rank=rank)[:, -1], dtype=np.float64)


def estimate_rates(reference: FloatArray, partial: FloatArray, rank: int = 2) -> FloatArray:
    """A new job's row by matrix completion against ``reference`` (rows = reference jobs,
    NaN = not measured) from its measured entries ``partial`` (NaN = not measured).

    Measured entries come back as given. With none measured, the row is the reference
    jobs' typical row (the completion's column effects: the geometric mean job), a prior
    that the first measurement rescales to the job's own level.
    """
    if reference.ndim != 2 or partial.shape != (reference.shape[1],):
        raise ValueError("estimate_rates needs a (jobs, columns) reference and a row of it")
    stacked = np.vstack([reference, partial[None, :]])
    return np.asarray(complete_matrix(stacked, rank=rank)[-1], dtype=np.float64)
