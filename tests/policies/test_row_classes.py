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
