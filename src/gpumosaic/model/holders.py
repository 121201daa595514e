"""Holders kept as rows of arrays: the ``ClusterState`` record of jobs placed in bulk.

A round mechanism places and releases thousands of single jobs per round; one
``Assignment`` object per placement, kept in a dict and read field by field at release,
costs more than the placement itself. Such holders (ids >= 0: a round mechanism's job
rows) are kept here instead, one row per id: node, GPU slots (-1 past the last),
milli per GPU, CPU and memory. ``ClusterState`` owns the table; an id is held either
here or in ``ClusterState.assignments`` / ``gangs``, never in two of them.
"""

from __future__ import annotations

from functools import cache
from types import ModuleType

import numpy as np

from gpumosaic.types import IntArray


def as_ints(values: IntArray) -> IntArray:
    """int64 and C-contiguous, as the compiled pass reads it (no copy when it is)."""
    return np.ascontiguousarray(values, dtype=np.int64)


@cache
def bulk_kernel() -> ModuleType:
    """The compiled loops, imported on first use (numba's import is not free)."""
    from gpumosaic.model import bulk_kernel as kernel

    return kernel


# Columns of the table: each field is a view of one column (slots: the last ``width``).
_NODE, _COUNT, _MILLI, _CPU, _MEMORY, _SLOTS = range(6)


class RowHolders:
    """One row per id in one table, the fields as column views (``node``, ``slots``,
    ``count``, ``milli``, ``cpu``, ``memory``): a release or a record touches one or two
    cache lines per id rather than one per field (a round moves thousands of scattered
    ids)."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.held = 0
        self._set_table(self._empty_table(0))

    def _empty_table(self, size: int) -> IntArray:
        table = np.zeros((size, _SLOTS + self.width), dtype=np.int64)
        table[:, _NODE] = -1  # -1: the id holds nothing here
        table[:, _SLOTS:] = -1
        return table

    def _set_table(self, table: IntArray) -> None:
        self._table = table
        self.node = table[:, _NODE]
        self.count = table[:, _COUNT]  # GPU slots held
        self.milli = table[:, _MILLI]
        self.cpu = table[:, _CPU]
        self.memory = table[:, _MEMORY]
        self.slots = table[:, _SLOTS:]

    def holds(self, job_id: int) -> bool:
        return 0 <= job_id < len(self.node) and self.node[job_id] >= 0

    def held_mask(self, ids: IntArray) -> IntArray:
        """Per id, whether it holds a row here."""
        inside = (ids >= 0) & (ids < len(self.node))
        out = np.zeros(len(ids), dtype=bool)
        out[inside] = self.node[ids[inside]] >= 0
        return out

    def add(
        self,
        ids: IntArray,
        nodes: IntArray,
        slots: IntArray,
        milli: IntArray,
        cpu: IntArray,
        memory: IntArray,
    ) -> bool:
        """Record holders (``slots``: one row of GPU slots per holder, any width up to
        the table's). False, and nothing recorded, if an id is negative, listed twice or
        already held here."""
        if not len(ids):
            return True
        if int(ids.min()) < 0:
            return False
        top = int(ids.max()) + 1
        if top > len(self.node):
            self._grow(max(top, 2 * len(self.node)))
        # One compiled pass (numpy's scatters cost ~10 passes over scattered rows).
        if not bulk_kernel().add_rows(
            as_ints(ids), as_ints(nodes), as_ints(slots), as_ints(milli), as_ints(cpu),
            as_ints(memory), self.node, self.slots, self.count, self.milli, self.cpu,
            self.memory,
        ):  # fmt: skip
            return False
        self.held += len(ids)
        return True

    def reserve(self, size: int) -> None:
        """Make room for ids below ``size`` (a compiled step writes rows itself)."""
        if size > len(self.node):
            self._grow(max(size, 2 * len(self.node)))

    def _grow(self, size: int) -> None:
        table = self._empty_table(size)
        table[: len(self._table)] = self._table
        self._set_table(table)
