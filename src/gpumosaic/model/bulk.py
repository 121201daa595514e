"""Bulk bookkeeping of ``ClusterState``: many assignments' resources taken or given back in
one compiled pass (``bulk_kernel.apply_parts``), from ``Assignment`` objects or from
arrays (``holders.RowHolders``, a compiled placement's result).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from itertools import chain
from operator import attrgetter
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from gpumosaic.errors import BookkeepingError
from gpumosaic.types import IntArray

if TYPE_CHECKING:
    from gpumosaic.model.state import Assignment, ClusterState

# Parts as ``apply_parts`` reads them: node per part, first slot of each part in the flat
# slot list (one more entry than parts), the flat slot list, milli per GPU, CPU, memory.
PartArrays = tuple[IntArray, IntArray, IntArray, IntArray, IntArray, IntArray]

# Reading one field of many assignments (``map`` over these runs in C).
_GPUS, _NODE, _MILLI = attrgetter("gpus"), attrgetter("node"), attrgetter("gpu_milli")
_CPU, _MEMORY = attrgetter("cpu_milli"), attrgetter("memory_mib")

_ERRORS = {
    1: "an assignment names a GPU slot its node lacks",
    2: "a GPU share would go over 1000 milli",
    3: "CPU or memory would go over capacity",
    4: "a job to release holds nothing (or is listed twice)",
}


def part_arrays(parts: Sequence[Assignment]) -> PartArrays:
    n = len(parts)
    gpus = list(map(_GPUS, parts))
    first = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, gpus), dtype=np.int64, count=n), out=first[1:])
    return (
        np.fromiter(map(_NODE, parts), dtype=np.int64, count=n),
        first,
        np.fromiter(chain.from_iterable(gpus), dtype=np.int64, count=int(first[-1])),
        np.fromiter(map(_MILLI, parts), dtype=np.int64, count=n),
        np.fromiter(map(_CPU, parts), dtype=np.int64, count=n),
        np.fromiter(map(_MEMORY, parts), dtype=np.int64, count=n),
    )


def apply(state: ClusterState, parts: PartArrays, sign: int) -> int:
    """Give back (``sign`` +1) or take (-1) the resources of ``parts`` on ``state``'s arrays,
    as ``allocate`` / ``release`` would one by one; taking is all or nothing (raises
    ``BookkeepingError`` and changes nothing). Returns the change of allocated milli."""
    error, delta = _kernel().apply_parts(
        sign, *parts, state.gpu_free, state.gpu_exists, state.gpu_tasks, state.cpu_free,
        state.memory_free, state.kind_count, state.node_version,
    )  # fmt: skip
    if error:
        raise BookkeepingError(_ERRORS[error])
    return int(delta)


def release_rows(state: ClusterState, ids: IntArray) -> int:
    """Give back what row holders ``ids`` hold (``holders.RowHolders``) and forget them;
    all or nothing. Returns the change of allocated milli."""
    rows = state.rows
    error, delta = _kernel().release_rows(
        ids, rows.node, rows.slots, rows.count, rows.milli, rows.cpu, rows.memory,
        state.gpu_free, state.gpu_tasks, state.cpu_free, state.memory_free, state.kind_count,
        state.node_version,
    )  # fmt: skip
    if error:
        raise BookkeepingError(_ERRORS[error])
    rows.held -= len(ids)
    return int(delta)


@cache
def _kernel() -> ModuleType:
    """The compiled loops, imported on first use (numba's import is not free)."""
    from gpumosaic.model import bulk_kernel

    return bulk_kernel
