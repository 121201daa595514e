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

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gpumosaic.types import FloatArray, IntArray


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
    # Fixed for the table's life (rates and rows never change between resets), so
    # computed once here rather than in every round's choice.
    runnable_mask: npt.NDArray[np.bool_] = field(init=False)  # ``runnable()``
    has_pairs: bool = field(init=False)
    # ``tie_orders()``, sorted by the table's first choice.
    tie_order: IntArray | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        ok = self.rate_a > 0
        self.runnable_mask = ok & ((self.rate_b > 0) | ~self.is_pair[:, None])
        self.has_pairs = bool(self.is_pair.any())

    def tie_orders(self) -> IntArray:
        """(T, E): per type, the entities by deficit descending, then allocation
        descending, then arrival (Gavel's stable sorts; ``choice_kernel.tie_orders``),
        fixed for the table's life."""
        if self.tie_order is None:
            from gpumosaic.mechanisms.rounds.choice_kernel import tie_orders

            self.tie_order = tie_orders(self.x, self.deficit)
        return self.tie_order

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
    """(E, T) Gavel priorities: X / fraction of the type's time received (the choice's
    own arithmetic, ``choice_kernel.priority``)."""
    from gpumosaic.mechanisms.rounds.choice_kernel import priority_matrix

    return np.asarray(priority_matrix(table.x, table.time, table.type_total), np.float64)


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
    alive: npt.NDArray[np.bool_] | None,
    type_order: Sequence[int] | IntArray,
    capacity_milli: Sequence[int] | IntArray,
    skip_zero_priority: bool,
    active: npt.NDArray[np.bool_] | None = None,
) -> tuple[IntArray, IntArray]:
    """Greedy pass of Gavel's ``_schedule_jobs_on_workers_helper``: the chosen entities and
    their types, in the order chosen (one compiled pass: ``choice_kernel.choose``).

    Only entities ``alive`` (default: all) whose job rows are all ``active`` (a mask over
    job rows; default: all) run. ``capacity_milli[t]`` is the type's GPU capacity in milli
    (fractional jobs share GPUs). FIFO skips entities of priority 0, every other policy
    also runs them when GPUs are left (work conserving).
    """
    from gpumosaic.mechanisms.rounds.choice_kernel import choose

    size = table.size
    if alive is None:
        alive = np.ones(size, dtype=bool)
    if active is None:
        rows = int(max(table.rows_a.max(initial=-1), table.rows_b.max(initial=-1))) + 1
        active = np.ones(rows, dtype=bool)
    out_entity = np.empty(size, dtype=np.int64)
    out_type = np.empty(size, dtype=np.int64)
    count = choose(
        table.x, table.time, table.tie_orders(), table.type_total, table.runnable_mask,
        table.demand_milli, table.rows_a, table.rows_b, alive, active,
        np.asarray(type_order, dtype=np.int64), np.asarray(capacity_milli, dtype=np.int64),
        skip_zero_priority, out_entity, out_type, np.zeros(len(active), dtype=bool),
    )  # fmt: skip
    return out_entity[:count], out_type[:count]
