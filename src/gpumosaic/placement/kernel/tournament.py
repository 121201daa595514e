"""A max tournament over an array of scores, compiled: the first position of the largest
score (numpy's ``argmax``; -1 when every score is -inf) kept under point updates in
O(log P), instead of a scan of all P positions after each change.

``tree`` has 2T entries, T the least power of two >= P: leaf p at T + p (-inf past the
last position), each inner node i the max of 2i and 2i + 1, the root at 1. The descent
takes the left child whenever it holds the maximum, so ties go to the lowest position;
0.0 and -0.0 compare equal, as they do for ``argmax``. Scores are never NaN.
"""

from __future__ import annotations

import numpy as np

from gpumosaic.kernel_cache import njit


@njit(cache=True)
def tree_build(raw0, tree):  # pragma: no cover
    """The max tournament over ``raw0`` (leaf p at T + p, -inf past the last position)."""
    t = tree.shape[0] // 2
    for p in range(t):
        tree[t + p] = raw0[p] if p < raw0.shape[0] else -np.inf
    for i in range(t - 1, 0, -1):
        tree[i] = max(tree[2 * i], tree[2 * i + 1])


@njit(cache=True)
def tree_set(tree, p, value):  # pragma: no cover
    """Leaf ``p`` becomes ``value``; its ancestors are updated up to where nothing changes."""
    t = tree.shape[0] // 2
    i = t + p
    tree[i] = value
    i //= 2
    while i >= 1:
        top = max(tree[2 * i], tree[2 * i + 1])
        if tree[i] == top:  # the ancestors hold this maximum already
            break
        tree[i] = top
        i //= 2


@njit(cache=True)
def tree_first_max(tree):  # pragma: no cover
    """``first_max`` of the leaves: descend to the leftmost leaf equal to the maximum."""
    best = tree[1]
    if best == -np.inf:
        return -1
    t = tree.shape[0] // 2
    i = 1
    while i < t:
        i = 2 * i if tree[2 * i] == best else 2 * i + 1
    return i - t
