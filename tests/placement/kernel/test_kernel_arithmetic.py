"""The exact arithmetic the compiled scorers share (placement/kernel/arithmetic.py).

- ``pairwise_sum`` is numpy's own summation order, bit for bit (FGD's Delta = 0 relies
  on it);
- the truncated FGD score read from the threshold table equals numpy's
  ``trunc(1 / (1 + exp(-x)) * 100)`` everywhere, including both sides of each threshold.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gpumosaic.placement import kernel


@given(
    st.lists(
        st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False),
        max_size=400,
    )
)
@settings(max_examples=200, deadline=None)
def test_pairwise_sum_is_numpys_sum(values: list[float]) -> None:
    a = np.array(values, dtype=np.float64)
    assert kernel.pairwise_sum(a, 0, len(a)) == a.sum()


def test_pairwise_sum_orders_like_numpy_where_order_matters() -> None:
    # Sums whose value depends on the order (mixed magnitudes), every length to 1,100.
    rng = np.random.default_rng(4)
    for n in range(1_100):
        a = rng.random(n) * 10.0 ** rng.integers(-8, 9, n)
        assert kernel.pairwise_sum(a, 0, n) == a.sum()
        assert kernel.pairwise_sum(a, 3, max(n - 5, 0)) == a[3 : 3 + max(n - 5, 0)].sum()


def test_score_thresholds_give_numpys_truncated_sigmoid() -> None:
    thresholds = kernel.score_thresholds()
    assert len(thresholds) == 100 and (np.diff(thresholds) > 0).all()
    rng = np.random.default_rng(1)
    x = np.concatenate(
        [
            rng.uniform(-40, 40, 500_000),
            rng.normal(0, 0.2, 500_000),
            np.round(rng.uniform(-8, 8, 200_000), 3),  # Delta in whole milli / 1000
            thresholds,
            np.nextafter(thresholds, -np.inf),
            np.nextafter(thresholds, np.inf),
            [0.0, -0.0, -1e-300, 1e-300],
        ]
    )
    with np.errstate(over="ignore"):
        plain = np.trunc(1.0 / (1.0 + np.exp(-x)) * 100)
    assert np.array_equal(np.searchsorted(thresholds, x, side="right"), plain)
    assert np.searchsorted(thresholds, 0.0, side="right") == 50  # Delta = 0 -> 50
