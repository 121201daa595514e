"""Job classes of identical LP rows: the compiled grouping is bitwise equality."""

from __future__ import annotations

import numpy as np
import pytest

from gpumosaic.policies.lp_base import group_identical_rows


def by_row_bytes(key: np.ndarray) -> tuple[list[int], list[int], list[int]]:
    """The definition: classes of equal row bytes, numbered by first appearance."""
    index: dict[bytes, int] = {}
    first: list[int] = []
    classes: list[int] = []
    for j in range(key.shape[0]):
        b = key[j].tobytes()
        if b not in index:
            index[b] = len(first)
            first.append(j)
        classes.append(index[b])
    counts = [classes.count(c) for c in range(len(first))]
    return classes, first, counts


@pytest.mark.parametrize(("n", "k", "distinct"), [(1, 3, 1), (47, 5, 20), (3000, 15, 130)])
def test_classes_are_those_of_equal_row_bytes(n: int, k: int, distinct: int) -> None:
    rng = np.random.default_rng(n)
    pool = rng.random((distinct, k))
    key = np.ascontiguousarray(pool[rng.integers(distinct, size=n)])
    inverse, first, counts = group_identical_rows(key)
    classes, want_first, want_counts = by_row_bytes(key)
    assert inverse.tolist() == classes
    assert first.tolist() == want_first
    assert counts.tolist() == want_counts
    np.testing.assert_array_equal(key[first][inverse], key)


def test_signed_zeros_and_nans_compare_by_their_bits() -> None:
    nan_a = np.frombuffer(np.uint64(0x7FF8000000000001).tobytes(), np.float64)[0]
    key = np.array(
        [[0.0, 1.0], [-0.0, 1.0], [0.0, 1.0], [np.nan, 2.0], [np.nan, 2.0], [nan_a, 2.0]]
    )
    inverse, first, counts = group_identical_rows(key)
    assert inverse.tolist() == by_row_bytes(key)[0] == [0, 1, 0, 2, 2, 3]
    assert first.tolist() == [0, 1, 3, 5] and counts.tolist() == [2, 1, 2, 1]


def test_no_rows_and_no_columns() -> None:
    inverse, first, counts = group_identical_rows(np.zeros((0, 4)))
    assert len(inverse) == len(first) == len(counts) == 0
    inverse, first, counts = group_identical_rows(np.zeros((3, 0)))
    assert inverse.tolist() == [0, 0, 0] and first.tolist() == [0] and counts.tolist() == [3]


def numpy_normalized_rates(
    throughputs: np.ndarray,
    scale: np.ndarray,
    weights: np.ndarray,
    capacity: np.ndarray,
    aware: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """The max-min LP's coefficients as numpy computed them before the compiled pass
    (``normalized_single_rates`` up to main 9c68d0c): the reference, bit for bit."""
    if aware:
        rates = np.asarray(throughputs, dtype=np.float64)
        total = capacity.sum()
        prop = np.zeros(len(rates)) if total <= 0 else rates @ (capacity / total)
    else:
        rates = (throughputs > 0).astype(np.float64)
        prop = np.ones(rates.shape[0])
    per_job = scale.astype(np.float64) / np.where(weights > 0, weights, 1.0)
    factor = np.where(prop > 0, per_job / np.where(prop > 0, prop, 1.0), 0.0)
    return rates * factor[:, None], factor


def random_jobs(rng: np.random.Generator, n: int) -> tuple[np.ndarray, ...]:
    """Jobs with repeats, zero rates, and weights that are 0, negative or NaN."""
    kinds = rng.random((6, 3)) * rng.choice([0.0, 1.0, 3e5], size=(6, 3))
    pick = rng.integers(6, size=n)
    throughputs = np.ascontiguousarray(kinds[pick])
    throughputs[rng.random(n) < 0.1] = 0.0
    scale = rng.choice([1, 2, 4, 8], size=n)
    weights = rng.choice([1.0, 0.5, 0.0, -1.0, np.nan, 3.0], size=n)
    demand = rng.choice([1.0, 0.3, 2.0], size=n)
    return throughputs, scale, weights, demand


@pytest.mark.parametrize("aware", [True, False])
@pytest.mark.parametrize("capacity", [[36.0, 36.0, 36.0], [8.0, 0.0, 24.0], [0.0, 0.0, 0.0]])
def test_compiled_rates_and_classes_are_numpys_bit_for_bit(
    aware: bool, capacity: list[float]
) -> None:
    """``normalized_single_rates`` (compiled) and the hot path's one-pass classes
    (``max_min_classes``, ``class_rows``) against the numpy formula and
    ``group_identical_rows`` over ``job_class_key``: the same bits, the same classes."""
    from gpumosaic.policies.max_min_fairness import _proportional, normalized_single_rates
    from gpumosaic.policies.row_classes import class_rows, max_min_classes

    cap = np.array(capacity)
    rng = np.random.default_rng(7)
    for n in (1, 5, 47, 300):
        thr, scale, weights, demand = random_jobs(rng, n)
        want, want_factor = numpy_normalized_rates(thr, scale, weights, cap, aware)
        rates, factor = normalized_single_rates(thr, scale, weights, cap, aware)
        assert rates.tobytes() == want.tobytes() and factor.tobytes() == want_factor.tobytes()

        key = np.empty((n, 7))
        inverse, first = np.empty(n, np.int64), np.empty(n, np.int64)
        prop = _proportional(thr, cap, aware)
        sf = scale.astype(np.float64)  # as the policy hands them over
        classes = max_min_classes(thr, prop, sf, weights, demand, aware, key, inverse, first)
        want_key = np.column_stack([want, thr > 0, demand])
        assert key.tobytes() == want_key.tobytes()
        want_inverse, want_first, counts = group_identical_rows(want_key)
        assert inverse.tolist() == want_inverse.tolist()
        assert first[:classes].tolist() == want_first.tolist()

        rows = want_first
        class_rates = np.empty((classes, 3))
        class_demand = np.empty(classes)
        usable = np.empty((classes, 3), dtype=bool)
        runnable = class_rows(
            thr, _proportional(thr[rows], cap, aware), sf, weights, demand, aware,
            rows, counts, class_rates, class_demand, usable,
        )  # fmt: skip
        want_rates, _ = numpy_normalized_rates(thr[rows], scale[rows], weights[rows], cap, aware)
        assert class_rates.tobytes() == want_rates.tobytes()
        assert class_demand.tobytes() == (demand[rows] * counts).tobytes()
        assert usable.tolist() == (thr[rows] > 0).tolist()
        assert runnable.tolist() == (want_rates > 0).any(axis=1).tolist()
