"""The compiled half of the round choice (``priorities.select_entity_arrays``): Gavel's
priorities and greedy pass, in one call a round.

Per type (in the round's type order) the candidates are the runnable, alive entities whose
jobs are not yet taken (of priority > 0 with ``skip_zero``); they are ranked by priority
descending, then deficit descending, then allocation descending, then arrival (entity
index) ascending -- exactly the order of Gavel's stable sorts -- and walked greedily: an
entity is taken when none of its jobs is taken yet and its demand fits what is left of the
type's milli. The tie order (deficit, allocation, arrival) is fixed between two solves,
so it is sorted once per table (``EntityTable.tie_orders``); a round lists each type's
candidates in that order and sorts them stably by priority -- only a head of a long queue
(see ``choose``) -- and the walk stops as soon as nothing left can fit.

Imported lazily (numba), like every kernel module; cached on disk (``kernel_cache``).
"""

from __future__ import annotations

import numpy as np

from gpumosaic.kernel_cache import njit


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


NEW_ENTITY_PRIORITY = 1e9  # Gavel: "don't use inf so 2 * new_priority > new_priority"
_RADIX_BITS = 11
_RADIX_FROM = 512  # below this many keys numba's merge sort is as fast


@njit(cache=True)
def stable_argsort(keys):  # pragma: no cover
    """``np.argsort(keys, kind="stable")`` for float keys without NaN: long arrays by an LSD
    radix sort over the order-preserving integer image of the doubles (stable, linear;
    -0.0 and 0.0 get one image, as they compare equal), short ones by merge sort."""
    n = keys.shape[0]
    if n < _RADIX_FROM:
        return np.argsort(keys, kind="mergesort")
    bits = keys.view(np.uint64)
    sign = np.uint64(1) << np.uint64(63)
    image = np.empty(n, dtype=np.uint64)
    for i in range(n):
        b = bits[i] if keys[i] != 0.0 else np.uint64(0)
        image[i] = ~b if b & sign else b | sign
    order = np.arange(n)
    spare = np.empty(n, dtype=np.int64)
    width = np.uint64(_RADIX_BITS)
    mask = np.uint64((1 << _RADIX_BITS) - 1)
    count = np.empty((1 << _RADIX_BITS) + 1, dtype=np.int64)
    shift = np.uint64(0)
    while shift < np.uint64(64):
        count[:] = 0
        for i in range(n):
            count[np.int64((image[i] >> shift) & mask) + 1] += 1
        if count.max() < n:  # some digit differs: one stable pass on it
            for d in range(1, count.shape[0]):
                count[d] += count[d - 1]
            for i in range(n):
                j = order[i]
                digit = np.int64((image[j] >> shift) & mask)
                spare[count[digit]] = j
                count[digit] += 1
            order, spare = spare, order
        shift += width
    return order


@njit(cache=True)
def tie_orders(x, deficit):  # pragma: no cover
    """(T, E): per type, the entities by deficit descending, then allocation descending,
    then arrival -- numpy's ``lexsort((-x, -deficit))``, as two stable sorts (allocation,
    then deficit)."""
    e_count, t_count = x.shape
    orders = np.empty((t_count, e_count), dtype=np.int64)
    for t in range(t_count):
        by_x = stable_argsort(-x[:, t])
        orders[t] = by_x[stable_argsort(-deficit[by_x, t])]
    return orders


@njit(cache=True)
def _walk(order, cand, need_of, rows_a, rows_b, taken, left, least, t, out_entity, out_type,
          written):  # fmt: skip  # pragma: no cover
    """Gavel's greedy over candidates ``order`` (positions in ``cand``, in rank order):
    take each whose jobs are free and whose demand fits what is left. Returns (what is
    left, entities written)."""
    for i in range(order.shape[0]):
        if left <= 0 or left < least:
            break  # full, or nothing can fit any more
        c = order[i]
        need = need_of[c]
        if need > left:
            continue
        e = cand[c]
        a, b = rows_a[e], rows_b[e]
        if taken[a] or (b >= 0 and taken[b]):
            continue  # a member was taken by a pair ranked higher on this type
        left -= need
        taken[a] = True
        if b >= 0:
            taken[b] = True
        out_entity[written] = e
        out_type[written] = t
        written += 1
    return left, written


@njit(cache=True)
def choose(
    x, time, tie_order, type_total, runnable, demand, rows_a, rows_b, alive, active,
    type_order, capacity_milli, skip_zero, out_entity, out_type, taken,
):  # fmt: skip  # pragma: no cover
    """The entities Gavel's greedy pass takes, in the order taken, into ``out_entity`` /
    ``out_type`` (length >= E); returns how many. ``tie_order``: the table's
    ``tie_orders()``; ``runnable`` (E, T): every member has a positive rate on the type;
    ``alive`` (E,) and ``active`` (job rows): an entity runs only if alive and every
    member's row is active. ``taken``: a False flag per job row (scratch, left all
    False)."""
    e_count = x.shape[0]
    # The type's candidates in tie order: entity, -priority (the sort key), demand.
    cand = np.empty(e_count, dtype=np.int64)
    key = np.empty(e_count)
    need_of = np.empty(e_count, dtype=np.int64)
    written = 0
    for k in range(type_order.shape[0]):
        t = type_order[k]
        left = capacity_milli[t]
        if left <= 0:
            continue
        total = type_total[t]
        n = 0
        least = 1 << 62  # the smallest demand among the candidates
        demand_sum = 0
        for j in range(e_count):
            e = tie_order[t, j]
            a, b = rows_a[e], rows_b[e]
            if not (runnable[e, t] and alive[e] and active[a]) or taken[a]:
                continue
            if b >= 0 and (taken[b] or not active[b]):
                continue
            p = priority(x[e, t], time[e, t], total)
            if skip_zero and not p > 0.0:
                continue
            cand[n] = e
            key[n] = -p
            need_of[n] = demand[e]
            n += 1
            demand_sum += demand[e]
            least = min(least, demand[e])
        if n == 0:
            continue
        keys = key[:n]
        # The greedy rarely reaches far down a long queue before the type is full: rank
        # only a head of about twice the entities that fill it at the mean demand (all
        # candidates whose key is at most the head's last, ties included, so the head is
        # exactly the first places of the full ranking); if milli is left, only later
        # candidates asking for at most what is left can still fit, ranked next. ``m``
        # sets how much is sorted, never what is chosen.
        m = min(n, 2 * left // max(demand_sum // n, 1) + 64)
        if m >= n:
            order = stable_argsort(keys)  # stable: ties keep tie order
            left, written = _walk(order, cand, need_of, rows_a, rows_b, taken, left, least,
                                  t, out_entity, out_type, written)  # fmt: skip
            continue
        kth = np.partition(keys, m - 1)[m - 1]
        head = np.flatnonzero(keys <= kth)
        head = head[stable_argsort(keys[head])]
        left, written = _walk(head, cand, need_of, rows_a, rows_b, taken, left, least, t,
                              out_entity, out_type, written)  # fmt: skip
        if left > 0 and left >= least:
            tail = np.flatnonzero((keys > kth) & (need_of[:n] <= left))
            tail = tail[stable_argsort(keys[tail])]
            left, written = _walk(tail, cand, need_of, rows_a, rows_b, taken, left, least, t,
                                  out_entity, out_type, written)  # fmt: skip
    for i in range(written):
        e = out_entity[i]
        taken[rows_a[e]] = False
        if rows_b[e] >= 0:
            taken[rows_b[e]] = False
    return written
