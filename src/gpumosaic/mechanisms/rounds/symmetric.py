"""The symmetric shortcut of the lease book: whole GPUs on identical one-GPU servers.

On a GPU type whose nodes all hold exactly one GPU and have the same CPU and memory, a job
asking for whole GPUs can only go to fully free nodes, and those are indistinguishable:
whichever the strategy picks, the cluster ends in the same multiset of node states, so no
simulated quantity (progress, JCT, utilization, fragmentation, power, later placements up
to a relabelling of identical nodes) can differ. There the mechanism takes the
lowest-index free nodes without scoring them; this is most of Gavel's experiments, where
jobs change GPU type often.

All of a round's such entities are placed by one compiled step (``kernel.place_symmetric``)
that applies that rule entity by entity, in order, and records single jobs as rows of the
state (``model.holders``); pairs and gangs are then recorded as assignments.
"""

from __future__ import annotations

from functools import cache
from types import ModuleType

import numpy as np

from gpumosaic.errors import BookkeepingError
from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.types import BoolArray, IntArray


class SymmetricTypes:
    """Which GPU types take the shortcut, and their nodes."""

    def __init__(self, state: ClusterState, n_types: int, enabled: bool) -> None:
        nodes = [_symmetric_nodes(state, t) if enabled else None for t in range(n_types)]
        self.mask = np.array([n is not None for n in nodes], dtype=bool)
        # Nodes of type t: type_nodes[type_start[t]:type_start[t + 1]] (none: not symmetric).
        blocks = [n if n is not None else np.zeros(0, dtype=np.int64) for n in nodes]
        self.type_nodes = np.concatenate([np.zeros(0, dtype=np.int64), *blocks]).astype(np.int64)
        self.type_start = np.zeros(n_types + 1, dtype=np.int64)
        np.cumsum([len(b) for b in blocks], out=self.type_start[1:])

    def place(
        self,
        state: ClusterState,
        types: IntArray,
        holders: list[int],
        num_gpu: IntArray,
        cpu_per_gpu: IntArray,
        memory_per_gpu: IntArray,
        eligible: BoolArray,
    ) -> BoolArray:
        """Place, in order, entities (holder ids ``holders``) asking for ``num_gpu`` whole
        GPUs of symmetric type ``types[i]`` with CPU and memory per GPU (``eligible``
        False: it may not span nodes, so more than one GPU is out of reach). Allocates
        them on ``state`` (one part per node; several: a gang) and returns which got GPUs."""
        kernel = symmetric_kernel()
        if not state.assignments.keys().isdisjoint(holders) or not state.gangs.keys().isdisjoint(
            holders
        ):
            raise BookkeepingError("an entity placed anew already holds GPUs")
        n = len(holders)
        ids = np.asarray(holders, dtype=np.int64)
        as_row = (num_gpu == 1) & (ids >= 0)
        rows = state.rows
        if n:
            rows.reserve(int(ids.max()) + 1)
        out_first = np.empty(n, dtype=np.int64)
        out_nodes = np.empty(int(num_gpu.sum()), dtype=np.int64)
        count, written = kernel.place_symmetric(
            types, num_gpu, cpu_per_gpu, memory_per_gpu, eligible, self.type_nodes,
            self.type_start, state.gpu_free, state.gpu_tasks, state.cpu_free, state.memory_free,
            state.kind_count, state.node_version, out_first, out_nodes, ids, as_row, rows.node,
            rows.slots, rows.count, rows.milli, rows.cpu, rows.memory,
        )  # fmt: skip
        if count < 0:
            raise BookkeepingError("an entity placed anew already holds GPUs")
        state.rows_written(written, written * MILLI_PER_GPU)
        placed = out_first >= 0
        if written == int(placed.sum()):
            return placed
        # Pairs (negative ids) and gangs are recorded as assignments.
        rest = np.flatnonzero(placed & ~as_row).tolist()
        where = out_nodes.tolist()
        singles: list[Assignment] = []
        gangs: list[tuple[Assignment, ...]] = []
        for j in rest:
            h, f, kk = holders[j], int(out_first[j]), int(num_gpu[j])
            c, m = int(cpu_per_gpu[j]), int(memory_per_gpu[j])
            parts = tuple(Assignment(h, v, (0,), MILLI_PER_GPU, c, m) for v in where[f : f + kk])
            if kk == 1:
                singles.extend(parts)
            else:
                gangs.append(parts)
        state.adopt(singles)
        state.adopt_gangs(gangs)
        return placed


@cache
def symmetric_kernel() -> ModuleType:
    """The compiled step, imported on first use (numba's import is not free)."""
    from gpumosaic.mechanisms.rounds import kernel

    return kernel


def _symmetric_nodes(state: ClusterState, t: int) -> IntArray | None:
    """Nodes of type ``t`` if they all hold one GPU and equal CPU and memory, else None."""
    nodes = np.flatnonzero(state.node_model == t)
    if len(nodes) == 0 or (state.num_gpus[nodes] != 1).any():
        return None
    if np.ptp(state.cpu_capacity[nodes]) or np.ptp(state.memory_capacity[nodes]):
        return None
    return nodes
