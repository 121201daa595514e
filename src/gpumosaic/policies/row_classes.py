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
