"""Gavel's round mechanism, the pure part: who runs next round, by priority.

An *entity* is what the allocation gives time to: a single job or, with space sharing, a
pair of jobs packed on the same GPUs. Between two policy solves the set of entities is
fixed (jobs that arrive later are not in the allocation and wait for the next solve), so
everything here is a fixed-size array indexed by entity and GPU type.

Gavel's accounting, kept exactly because its published numbers depend on it:

- every entity starts each accounting period (a "reset", done with every solve) with a
  credit of half a round on every type, and the type's total starts at the sum of those
  credits; a run adds its execution time to the entity and to the type's total;
- priority(e, t) = X[e, t] / (time[e, t] / total[t]); X[e, t] * 1e9 when the fraction is
  0 (nothing received yet), 0 when X[e, t] is 0;
- at a reset, deficit(e, t) += X_old[e, t] * elapsed - (time[e, t] - credit);
- each type's queue is sorted by (priority, deficit, allocation), descending, ties by
  arrival order; types are visited in a fixed order for ``_perf`` and packed policies and
  in a random order for the others; a greedy pass takes every entity whose jobs are not
  yet scheduled and whose GPU demand still fits the type.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gpumosaic.types import FloatArray, IntArray

NEW_ENTITY_PRIORITY = 1e9  # Gavel: "don't use inf so 2 * new_priority > new_priority"


@dataclass(slots=True)
class EntityTable:
    """The entities of the allocation in force, and their accounting since the last reset.

    Owned by the allocation book; rebuilt at every solve. ``rows_b`` is -1 for a single
    job. ``rate_a``/``rate_b`` are each member's steps/s on each type (packed rates for a
    pair). ``demand_milli`` is the GPU milli the entity occupies on its type.
    """

    rows_a: IntArray
    rows_b: IntArray
    x: FloatArray  # (E, T) allocation
    time: FloatArray  # (E, T) seconds received since the last reset, plus the credit
    deficit: FloatArray  # (E, T)
    rate_a: FloatArray  # (E, T)
    rate_b: FloatArray  # (E, T), 0 for singles
    demand_milli: IntArray  # (E,)
    type_total: FloatArray  # (T,) Gavel's per-type "worker time so far"
    # Fixed for the table's life (x, deficit, rates and rows never change between resets),
    # so computed once here rather than in every round's choice.
    runnable_mask: npt.NDArray[np.bool_] = field(init=False)  # ``runnable()``
    # (T, E): per type, the entities by (deficit, x) descending, then arrival order.
    tie_order: IntArray = field(init=False)
    has_pairs: bool = field(init=False)

    def __post_init__(self) -> None:
        ok = self.rate_a > 0
        self.runnable_mask = ok & ((self.rate_b > 0) | ~self.is_pair[:, None])
        e, t = self.x.shape
        tie_order = np.empty((t, e), dtype=np.int64)
        for k in range(t):
            # lexsort: last key is primary (descending deficit, then allocation); it is
            # stable, so equal keys keep ascending arrival (Python's stable sort in Gavel).
            tie_order[k] = np.lexsort((-self.x[:, k], -self.deficit[:, k]))
        self.tie_order = tie_order
        self.has_pairs = bool(self.is_pair.any())

    @property
    def size(self) -> int:
        return len(self.rows_a)

    @property
    def is_pair(self) -> npt.NDArray[np.bool_]:
        return self.rows_b >= 0

    def runnable(self) -> npt.NDArray[np.bool_]:
        """(E, T): every member has a positive rate on the type."""
        return self.runnable_mask


def priorities(table: EntityTable) -> FloatArray:
    """(E, T) Gavel priorities: X / fraction of the type's time received."""
    x = table.x
    total = table.type_total[None, :]
    if total.min() > 0:
        fraction = table.time / total
        if fraction.min() > 0:
            # The usual case (every time includes the reset's credit): the general
            # expression below reduces to this, value for value.
            prio = x / fraction
            prio[x == 0] = 0.0
            return prio
    with np.errstate(divide="ignore", invalid="ignore"):
        fraction = np.where(total > 0, table.time / np.where(total > 0, total, 1.0), 0.0)
        prio = np.where(
            fraction > 0, x / np.where(fraction > 0, fraction, 1.0), x * NEW_ENTITY_PRIORITY
        )
    prio[x == 0] = 0.0
    return np.asarray(prio, dtype=np.float64)


def reset_accounting(table: EntityTable, elapsed_s: float, credit_s: float) -> FloatArray:
    """Deficits after a reset: deficit += X * elapsed - (time - credit). Returns (E, T)."""
    return np.asarray(table.deficit + table.x * elapsed_s - (table.time - credit_s), np.float64)


def select_entities(
    table: EntityTable,
    alive: npt.NDArray[np.bool_],
    type_order: list[int],
    capacity_milli: list[int],
    skip_zero_priority: bool,
) -> list[tuple[int, int]]:
    """``select_entity_arrays`` as (entity, type) pairs."""
    es, ts = select_entity_arrays(table, alive, type_order, capacity_milli, skip_zero_priority)
    return list(zip(es.tolist(), ts.tolist(), strict=True))


def select_entity_arrays(
    table: EntityTable,
    alive: npt.NDArray[np.bool_],
    type_order: list[int],
    capacity_milli: list[int],
    skip_zero_priority: bool,
) -> tuple[IntArray, IntArray]:
    """Greedy pass of Gavel's ``_schedule_jobs_on_workers_helper``: the chosen entities and
    their types, in the order chosen.

    ``alive`` masks entities whose jobs are all still active. ``capacity_milli[t]`` is the
    type's GPU capacity in milli (fractional jobs share GPUs). FIFO skips entities of
    priority 0, every other policy also runs them when GPUs are left (work conserving).
    """
    empty = np.zeros(0, dtype=np.int64)
    if table.size == 0:
        return empty, empty
    prio = priorities(table)
    runnable = table.runnable_mask & alive[:, None]
    rows_a, rows_b = table.rows_a, table.rows_b
    has_pairs = table.has_pairs
    # Without pairs every job is one entity: "its job already runs" is per entity.
    taken = np.zeros(
        table.size if not has_pairs else int(max(rows_a.max(), rows_b.max())) + 1, dtype=bool
    )
    pair = rows_b >= 0
    chosen: list[IntArray] = []
    chosen_types: list[int] = []
    for t in type_order:
        left = capacity_milli[t]
        if left <= 0:
            continue
        if has_pairs:
            mask = runnable[:, t] & ~taken[rows_a] & ~(pair & taken[np.maximum(rows_b, 0)])
        else:
            mask = runnable[:, t] & ~taken
        if skip_zero_priority:
            mask &= prio[:, t] > 0
        # Descending priority; ties by the table's fixed order (deficit, allocation,
        # arrival): the candidates listed in that order, then one stable sort.
        tie_order = table.tie_order[t]
        candidates = tie_order[mask[tie_order]]
        if len(candidates) == 0:
            continue
        if not has_pairs:
            # Singles only: no member is shared within the type, so the greedy is a
            # capacity walk over the demands (vectorized, same picks).
            take = _ranked_fit(candidates, -prio[candidates, t], table.demand_milli, left)
            taken[take] = True
            chosen.append(take)
            chosen_types.append(t)
            continue
        ranked = candidates[np.argsort(-prio[candidates, t], kind="stable")]
        if not pair[ranked].any():
            take = ranked[_greedy_fit(table.demand_milli[ranked], left)]
            taken[rows_a[take]] = True
        else:
            picked = _greedy(ranked.tolist(), t, left, rows_a, rows_b, table, taken)
            take = np.array([e for e, _ in picked], dtype=np.int64)
        chosen.append(take)
        chosen_types.append(t)
    if not chosen:
        return empty, empty
    es = np.concatenate(chosen)
    ts = np.repeat(np.array(chosen_types, dtype=np.int64), [len(c) for c in chosen])
    return es.astype(np.int64), ts


def _ranked_fit(candidates: IntArray, key: FloatArray, demand: IntArray, left: int) -> IntArray:
    """The entities Gavel's greedy takes from ``candidates`` (listed in tie order) ranked by
    ``key`` ascending (stable: ties keep the tie order), with ``left`` milli; in the order
    taken. The same picks as ranking every candidate, without sorting them all: the
    greedy rarely reaches far down a long queue before the type is full.

    The candidates whose key is at most the m-th smallest come first in the full ranking
    (ties included), so they are ranked and walked first; if milli is left, only later
    candidates asking for at most what is left can still be taken (what is left only
    shrinks), and those are ranked and walked next. ``m`` (about twice the queue length
    that fills the type at the mean demand) only sets how much is sorted, never what is
    chosen."""
    n = len(candidates)
    need = demand[candidates]
    m = min(n, 2 * left // max(int(need.mean()), 1) + 64)
    if m >= n:
        ranked = np.argsort(key, kind="stable")
        return candidates[ranked[_greedy_fit(need[ranked], left)]]
    kth = np.partition(key, m - 1)[m - 1]
    head = np.flatnonzero(key <= kth)
    head = head[np.argsort(key[head], kind="stable")]
    picked = head[_greedy_fit(need[head], left)]
    left -= int(need[picked].sum())
    if left > 0:
        tail = np.flatnonzero((key > kth) & (need <= left))
        if len(tail):
            tail = tail[np.argsort(key[tail], kind="stable")]
            picked = np.concatenate([picked, tail[_greedy_fit(need[tail], left)]])
    return candidates[picked]


def _greedy_fit(demand: IntArray, left: int) -> IntArray:
    """Positions Gavel's greedy takes from ``demand`` (in rank order) with ``left`` milli:
    each entity that still fits is taken, one that does not is skipped.

    A prefix whose running sum fits is all taken; the first entity past it does not fit,
    and from there only entities of demand <= what is left can be, so the walk jumps to
    the next such one and repeats. Each jump leaves less than the skipped demand, so
    there are few jumps (at most left / smallest demand), each one numpy pass.
    """
    out: list[IntArray] = []
    start, n = 0, len(demand)
    while start < n and left > 0:
        run = demand[start:].cumsum()
        fit = int(run.searchsorted(left, side="right"))  # run[:fit] <= left
        if fit:
            out.append(np.arange(start, start + fit))
            left -= int(run[fit - 1])
        start += fit
        if start >= n or left <= 0:
            break
        later = np.flatnonzero(demand[start + 1 :] <= left)
        if len(later) == 0:
            break
        start += 1 + int(later[0])
    if not out:
        return np.zeros(0, dtype=np.int64)
    return out[0] if len(out) == 1 else np.concatenate(out)


def _greedy(
    ranked: list[int],
    t: int,
    left: int,
    rows_a: IntArray,
    rows_b: IntArray,
    table: EntityTable,
    taken: npt.NDArray[np.bool_],
) -> list[tuple[int, int]]:
    """Gavel's loop: skip entities whose jobs already run or that do not fit what is left."""
    out: list[tuple[int, int]] = []
    demand = table.demand_milli
    for e in ranked:
        a, b = int(rows_a[e]), int(rows_b[e])
        if taken[a] or (b >= 0 and taken[b]):
            continue
        need = int(demand[e])
        if need > left:
            continue
        left -= need
        taken[a] = True
        if b >= 0:
            taken[b] = True
        out.append((e, t))
        if left <= 0:
            break
    return out
