"""The compiled half of the round choice (``priorities.select_entity_arrays``): Gavel's
priorities and greedy pass, in one call a round.

Per type (in the round's type order) the candidates are the runnable, alive entities whose
jobs are not yet taken (of priority > 0 with ``skip_zero``); they are ranked by priority
descending, then deficit descending, then allocation descending, then arrival (entity
index) ascending -- exactly the order of Gavel's stable sorts -- and walked greedily: an
entity is taken when none of its jobs is taken yet and its demand fits what is left of the
type's milli. The ranking is a binary heap popped only as far as the walk goes: the type
is usually full long before the queue ends, and the walk stops as soon as nothing left in
the queue can fit (what is left is below every candidate's demand).

Imported lazily (numba), like every kernel module; cached on disk (``kernel_cache``).
"""

from __future__ import annotations

import numpy as np

from gpumosaic.kernel_cache import njit
from gpumosaic.mechanisms.rounds.priorities import NEW_ENTITY_PRIORITY


@njit(cache=True, inline="always")
def priority(x, time, total):  # pragma: no cover
    """Gavel's priority of one (entity, type): X / (time / total); X * 1e9 while the
    fraction received is 0; 0 when X is 0 (numpy's arithmetic, value for value)."""
    if x == 0.0:
        return 0.0
    fraction = time / total if total > 0.0 else 0.0
    if fraction > 0.0:
        return x / fraction
    return x * NEW_ENTITY_PRIORITY


@njit(cache=True)
def priority_matrix(x, time, type_total):  # pragma: no cover
    """(E, T) priorities of every entity on every type."""
    e_count, t_count = x.shape
    out = np.empty((e_count, t_count))
    for e in range(e_count):
        for t in range(t_count):
            out[e, t] = priority(x[e, t], time[e, t], type_total[t])
    return out


@njit(cache=True, inline="always")
def _before(i, j, prio, deficit, x, t):  # pragma: no cover
    """Entity ``i`` ranks before entity ``j`` on type ``t`` (``prio`` of that type)."""
    if prio[i] != prio[j]:
        return prio[i] > prio[j]
    if deficit[i, t] != deficit[j, t]:
        return deficit[i, t] > deficit[j, t]
    if x[i, t] != x[j, t]:
        return x[i, t] > x[j, t]
    return i < j


@njit(cache=True, inline="always")
def _sift_down(heap, at, size, prio, deficit, x, t):  # pragma: no cover
    item = heap[at]
    while True:
        child = 2 * at + 1
        if child >= size:
            break
        right = child + 1
        if right < size and _before(heap[right], heap[child], prio, deficit, x, t):
            child = right
        if not _before(heap[child], item, prio, deficit, x, t):
            break
        heap[at] = heap[child]
        at = child
    heap[at] = item


@njit(cache=True)
def choose(
    x, time, deficit, type_total, runnable, demand, rows_a, rows_b, alive, active,
    type_order, capacity_milli, skip_zero, out_entity, out_type,
):  # fmt: skip  # pragma: no cover
    """The entities Gavel's greedy pass takes, in the order taken, into ``out_entity`` /
    ``out_type`` (length >= E); returns how many. ``runnable`` (E, T): every member has a
    positive rate on the type; ``alive`` (E,) and ``active`` (job rows): an entity
    runs only if alive and every member's row is active."""
    e_count = x.shape[0]
    taken = np.zeros(active.shape[0], dtype=np.bool_)
    prio = np.empty(e_count)
    heap = np.empty(e_count, dtype=np.int64)
    written = 0
    for k in range(type_order.shape[0]):
        t = type_order[k]
        left = capacity_milli[t]
        if left <= 0:
            continue
        total = type_total[t]
        size = 0
        least = 1 << 62  # the smallest demand among the candidates
        for e in range(e_count):
            a, b = rows_a[e], rows_b[e]
            if not (runnable[e, t] and alive[e] and active[a]) or taken[a]:
                continue
            if b >= 0 and (taken[b] or not active[b]):
                continue
            p = priority(x[e, t], time[e, t], total)
            if skip_zero and not p > 0.0:
                continue
            prio[e] = p
            heap[size] = e
            size += 1
            if demand[e] < least:
                least = demand[e]
        for at in range(size // 2 - 1, -1, -1):
            _sift_down(heap, at, size, prio, deficit, x, t)
        while size > 0 and left > 0 and left >= least:
            e = heap[0]
            size -= 1
            if size > 0:
                heap[0] = heap[size]
                _sift_down(heap, 0, size, prio, deficit, x, t)
            a, b = rows_a[e], rows_b[e]
            if taken[a] or (b >= 0 and taken[b]):
                continue  # a member was taken by a pair ranked higher on this type
            need = demand[e]
            if need > left:
                continue
            left -= need
            taken[a] = True
            if b >= 0:
                taken[b] = True
            out_entity[written] = e
            out_type[written] = t
            written += 1
    return written
