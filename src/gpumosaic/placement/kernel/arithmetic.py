"""Exact arithmetic the compiled scorers share: numpy's pairwise summation order and
the thresholds of FGD's truncated sigmoid (see ``placement.kernel``)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit


@njit(cache=True)
def _block_sum(a, lo, n):  # pragma: no cover
    """numpy's pairwise sum of up to 128 elements: 8 accumulators, then the rest."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    end = n - n % 8
    while i < end:
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@njit(cache=True)
def _halves_sum(a, lo, n):  # pragma: no cover
    """Above 128 elements numpy sums the two halves (split at a multiple of 8) and adds
    them; evaluated here with an explicit stack (numba's cache and recursion do not mix)."""
    los = np.empty(64, dtype=np.int64)
    ns = np.empty(64, dtype=np.int64)
    stage = np.zeros(64, dtype=np.int64)
    left = np.empty(64)
    top = 0
    los[0] = lo
    ns[0] = n
    ret = 0.0
    while top >= 0:
        start, m = los[top], ns[top]
        if m <= 128:
            ret = _block_sum(a, start, m)
            top -= 1
            continue
        half = m // 2
        half -= half % 8
        if stage[top] == 0:
            stage[top] = 1
            top += 1
            los[top], ns[top], stage[top] = start, half, 0
        elif stage[top] == 1:
            left[top] = ret
            stage[top] = 2
            top += 1
            los[top], ns[top], stage[top] = start + half, m - half, 0
        else:
            ret = left[top] + ret
            top -= 1
    return ret


@njit(cache=True)
def pairwise_sum(a, lo, n):  # pragma: no cover
    """``a[lo:lo + n].sum()`` in numpy's order (its ``pairwise_sum``: 8 accumulators over
    blocks of up to 128, halves above that), so the result is bit-identical."""
    if n <= 128:
        return _block_sum(a, lo, n)
    return _halves_sum(a, lo, n)


def score_thresholds() -> npt.NDArray[np.float64]:
    """T[s - 1] = the least double x with ``trunc(1 / (1 + np.exp(-x)) * 100) >= s``, for
    s = 1..100, found by bisection over the doubles with numpy's own formula; the truncated
    FGD score of x is then ``searchsorted(T, x, 'right')``. (The formula is monotone: a
    test checks the table against it on millions of x and around every threshold.)"""
    target = np.arange(1, 101, dtype=np.float64)
    # Work on the doubles' order-preserving integer keys: bisection ends on adjacent doubles.
    lo = np.full(100, _key(-800.0), dtype=np.int64)  # score 0 there
    hi = np.full(100, _key(800.0), dtype=np.int64)  # score 100 there
    while True:
        open_ = hi - 1 > lo
        if not open_.any():
            break
        mid = (lo >> 1) + (hi >> 1) + (lo & hi & 1)  # no overflow at +-2**62
        with np.errstate(over="ignore"):
            x = _double(mid)
            score = np.trunc(1.0 / (1.0 + np.exp(-x)) * 100)
        up = score >= target
        hi = np.where(open_ & up, mid, hi)
        lo = np.where(open_ & ~up, mid, lo)
    return _double(hi)


def _key(x: float) -> int:
    bits = int(np.array(x, dtype=np.float64).view(np.int64))
    return bits if bits >= 0 else -(bits & 0x7FFFFFFFFFFFFFFF)


def _double(keys: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    bits = np.where(keys >= 0, keys, (-keys) | np.int64(-0x8000000000000000))
    return np.asarray(bits, dtype=np.int64).view(np.float64)
