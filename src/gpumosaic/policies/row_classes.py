"""Classes of identical rows, compiled (numba): the job classes of an LP policy.

A policy that merges interchangeable jobs (``lp_base.JobClasses``) groups the rows of a
key matrix by bitwise equality at every solve; at Alibaba scale that is ~8,000 rows a
solve, where a Python dict of row bytes cost ~1 ms. Here one pass with an open-addressing
hash table over the rows' 64-bit words does it: every candidate class is confirmed by
comparing the words themselves, so the classes are exactly those of bitwise equality
(a hash collision only costs a probe), numbered by first appearance.

Import lazily (numba's import costs ~0.2 s of CPU); compiled once per machine into
numba's cache.
"""

from __future__ import annotations

import numpy as np

from gpumosaic.kernel_cache import njit

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


@njit(cache=True)
def row_classes(words, inverse, first):  # pragma: no cover
    """Rows of the (n, k) uint64 ``words`` grouped by equality: writes each row's class
    to ``inverse`` and each class's first row to ``first[:classes]``, classes numbered by
    first appearance; returns the number of classes."""
    n, k = words.shape
    size = 1
    while size < 2 * n:
        size *= 2
    mask = np.uint64(size - 1)
    table = np.full(size, -1, dtype=np.int64)  # slot -> class
    classes = 0
    for j in range(n):
        h = _FNV_OFFSET
        for w in range(k):
            h = (h ^ words[j, w]) * _FNV_PRIME
        h ^= h >> np.uint64(29)
        slot = np.int64(h & mask)
        while True:
            c = table[slot]
            if c < 0:
                table[slot] = classes
                first[classes] = j
                inverse[j] = classes
                classes += 1
                break
            r = first[c]
            same = True
            for w in range(k):
                if words[r, w] != words[j, w]:
                    same = False
                    break
            if same:
                inverse[j] = c
                break
            slot = (slot + 1) & (size - 1)
    return classes


@njit(cache=True)
def _row_factor(scale, weight, prop):  # pragma: no cover
    """Gavel's per-job objective factor sf / (w * prop), as ``normalized_single_rates``
    writes it in numpy: a weight <= 0 counts as 1, a job with prop <= 0 gets 0."""
    per_job = scale / (weight if weight > 0 else 1.0)
    factor = per_job / (prop if prop > 0 else 1.0)
    return factor if prop > 0 else 0.0


@njit(cache=True)
def normalized_rows(throughputs, prop, scale, weight, aware, rates, factor):  # pragma: no cover
    """The max-min LP's objective coefficients of each job: ``rates[j, t]`` = rate x
    factor (rate = the throughput, or 1 where it is > 0 when not ``aware``), and
    ``factor[j]``; ``prop`` is each job's proportional throughput (1 when not aware),
    ``scale`` and ``weight`` its scale factor and priority weight (float64)."""
    n, n_types = throughputs.shape
    for j in range(n):
        f = _row_factor(scale[j], weight[j], prop[j])
        factor[j] = f
        for t in range(n_types):
            thr = throughputs[j, t]
            rate = thr if aware else (1.0 if thr > 0 else 0.0)
            rates[j, t] = rate * f


@njit(cache=True)
def max_min_classes(
    throughputs, prop, scale, weight, demand, aware, key, inverse, first
):  # pragma: no cover
    """The job classes of the max-min LP in one pass: writes each job's class key row
    (its ``normalized_rows`` coefficients, 1.0 where it has throughput, its demand) to
    the (n, 2 T + 1) float64 ``key`` and groups the rows by bitwise equality
    (``row_classes``: ``inverse``, ``first``); returns the number of classes."""
    n, n_types = throughputs.shape
    for j in range(n):
        f = _row_factor(scale[j], weight[j], prop[j])
        for t in range(n_types):
            thr = throughputs[j, t]
            rate = thr if aware else (1.0 if thr > 0 else 0.0)
            key[j, t] = rate * f
            key[j, n_types + t] = 1.0 if thr > 0 else 0.0
        key[j, 2 * n_types] = demand[j]
    return row_classes(key.view(np.uint64), inverse, first)


@njit(cache=True)
def class_rows(
    throughputs, prop, scale, weight, demand, aware, first, counts, rates, class_demand, usable
):  # pragma: no cover
    """What the LP over classes reads of each class c (its first job j = first[c]):
    ``rates[c]`` (``normalized_rows`` of job j with the class's ``prop[c]``), its
    demand x count and where it has throughput; returns the (classes,) mask of classes
    with a positive coefficient somewhere (those in the minimum)."""
    n_types = throughputs.shape[1]
    classes = len(first)
    runnable = np.zeros(classes, dtype=np.bool_)
    for c in range(classes):
        j = first[c]
        f = _row_factor(scale[j], weight[j], prop[c])
        for t in range(n_types):
            thr = throughputs[j, t]
            rate = thr if aware else (1.0 if thr > 0 else 0.0)
            value = rate * f
            rates[c, t] = value
            usable[c, t] = thr > 0
            if value > 0:
                runnable[c] = True
        class_demand[c] = demand[j] * np.float64(counts[c])
    return runnable
