"""Hide known entries of Gavel's table, estimate them back, and bound the error.

Measured (seed 0, leave-one-job-type-out over the 26 single-GPU types, 81 configurations
= 3 GPU types x (alone + 26 partners)), median relative error on the hidden entries:

| profiled | completion (rank 2) | nearest reference (scaled) |
|---|---|---|
| 10% | 0.111 | 0.072 |
| 25% | 0.100 | 0.071 |
| 50% | 0.083 | 0.057 |

A new GPU type's column from 8 profiled job types (20 draws): p100 from v100 + k80 median
0.16 (rank 1), k80 from v100 + p100 median 0.36: the K80's speed relative to newer GPUs
varies most across models, so a few profiles predict it least well.
"""

from __future__ import annotations

import numpy as np
import pytest

from gpumosaic.workloads.estimation import (
    ISOLATED,
    complete_matrix,
    cosine_nearest,
    estimate_new_gpu_type,
    estimate_rates,
    estimate_row,
    gavel_reference_matrix,
)
from gpumosaic.workloads.throughputs import GavelThroughputTable


@pytest.fixture(scope="module")
def reference():  # type: ignore[no-untyped-def]
    return gavel_reference_matrix(GavelThroughputTable.load())


def _leave_one_out_errors(values: np.ndarray, fraction: float) -> tuple[float, float]:
    rng = np.random.default_rng(0)
    completion, nearest = [], []
    for i in range(values.shape[0]):
        others = np.delete(values, i, axis=0)
        row = values[i]
        known = np.flatnonzero(np.isfinite(row))
        profiled = rng.choice(known, max(1, int(fraction * len(known))), replace=False)
        partial = np.full_like(row, np.nan)
        partial[profiled] = row[profiled]
        estimate = estimate_row(others, partial)
        hidden = np.setdiff1d(known, profiled)
        completion += list(np.abs(estimate.completed[hidden] - row[hidden]) / row[hidden])
        nearest += list(np.abs(estimate.nearest[hidden] - row[hidden]) / row[hidden])
        assert np.allclose(estimate.completed[profiled], row[profiled])
    return float(np.median(completion)), float(np.median(nearest))


def test_reference_matrix_shape(reference) -> None:  # type: ignore[no-untyped-def]
    assert reference.values.shape == (26, 3 * 27)
    assert ("v100", ISOLATED) in reference.columns
    assert np.isfinite(reference.values).mean() > 0.9


@pytest.mark.parametrize(
    ("fraction", "completion_bound", "nearest_bound"), [(0.1, 0.15, 0.10), (0.25, 0.13, 0.10)]
)
def test_hidden_entries_are_recovered(reference, fraction, completion_bound, nearest_bound) -> None:  # type: ignore[no-untyped-def]
    completion, nearest = _leave_one_out_errors(reference.values, fraction)
    assert completion < completion_bound
    assert nearest < nearest_bound


def test_new_gpu_type_from_a_few_profiles(reference) -> None:  # type: ignore[no-untyped-def]
    cols = [c for c, (_, partner) in enumerate(reference.columns) if partner == ISOLATED]
    iso = reference.values[:, cols]  # v100, p100, k80
    errors = {1: [], 2: []}  # type: ignore[var-annotated]
    for target in (1, 2):
        for seed in range(20):
            profiled = np.random.default_rng(seed).choice(iso.shape[0], 8, replace=False)
            column = np.full(iso.shape[0], np.nan)
            column[profiled] = iso[profiled, target]
            estimate = estimate_new_gpu_type(np.delete(iso, target, axis=1), column)
            hidden = np.setdiff1d(np.arange(iso.shape[0]), profiled)
            errors[target] += list(
                np.abs(estimate[hidden] - iso[hidden, target]) / iso[hidden, target]
            )
    assert np.median(errors[1]) < 0.2  # p100
    assert np.median(errors[2]) < 0.45  # k80


def test_completion_is_exact_on_an_additive_log_matrix() -> None:
    rows = np.array([1.0, 2.0, 4.0])
    cols = np.array([1.0, 3.0, 0.5])
    full = rows[:, None] * cols[None, :]
    observed = full.copy()
    observed[0, 2] = observed[2, 0] = np.nan
    assert complete_matrix(observed, rank=0) == pytest.approx(full)


def test_cosine_nearest_and_errors() -> None:
    reference = np.array([[1.0, 2.0, 3.0], [3.0, 1.0, 1.0]])
    assert cosine_nearest(np.array([2.0, np.nan, 6.0]), reference) == 0
    with pytest.raises(ValueError, match="shares"):
        cosine_nearest(np.array([np.nan, np.nan, np.nan]), reference)
    with pytest.raises(ValueError, match="positive"):
        complete_matrix(np.array([[1.0, -1.0]]))


def test_estimate_rates_keeps_measured_entries_and_has_a_prior(reference) -> None:  # type: ignore[no-untyped-def]
    cols = [c for c, (_, partner) in enumerate(reference.columns) if partner == ISOLATED]
    iso = reference.values[1:, cols]  # every type but the first: its references
    true = reference.values[0, cols]
    prior = estimate_rates(iso, np.full(3, np.nan), rank=1)
    assert np.isfinite(prior).all() and (prior > 0).all()
    partial = np.array([true[0], np.nan, np.nan])
    row = estimate_rates(iso, partial, rank=1)
    assert row[0] == true[0]
    # One measured model sets the job's level: the others move with it.
    doubled = estimate_rates(iso, 2 * partial, rank=1)
    assert doubled[1:] == pytest.approx(2 * row[1:], rel=1e-6)
    with pytest.raises(ValueError, match="row"):
        estimate_rates(iso, np.ones(4))
