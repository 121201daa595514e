"""Compiled bulk bookkeeping of ``ClusterState`` (numba): taking or giving back the
resources of many assignments in one call (``model.bulk`` calls it).

A round mechanism ends and starts hundreds to thousands of leases per round; one Python
``release`` each is most of a round, and numpy's scatter-adds cost tens of microseconds a
call whatever the batch (a round of Gavel's 36:36:36 cluster moves about ten jobs). These
loops apply each part exactly as ``ClusterState.allocate`` / ``release`` would, in order.
Import lazily (numba's import costs ~0.2 s of CPU); compiled once per machine into numba's
cache (``cache=True``).
"""

from __future__ import annotations

from gpumosaic.kernel_cache import njit
from gpumosaic.model.gpu import MILLI_PER_GPU

OK = 0
BAD_SLOT = 1  # a GPU slot the node lacks
GPU_OVER = 2  # a GPU share would go over 1000 milli
HOST_OVER = 3  # CPU or memory would go over capacity


@njit(cache=True)
def apply_parts(
    sign, node, first_slot, slots, milli, cpu, memory,
    gpu_free, gpu_exists, gpu_tasks, cpu_free, memory_free, kind_count, node_version,
):  # fmt: skip  # pragma: no cover
    """Give back (``sign`` +1) or take (-1) the resources of parts ``i``: GPU slots
    ``slots[first_slot[i]:first_slot[i + 1]]`` of ``node[i]`` at ``milli[i]`` each, CPU and
    memory. Taking checks each part before applying it and, on the first that does not
    fit, undoes the ones applied and returns its error code (nothing changes).

    Returns (error code, the change of allocated GPU milli)."""
    n = len(node)
    width = gpu_free.shape[1]
    delta = 0
    done = n
    error = OK
    for i in range(n):
        v = node[i]
        lo, hi = first_slot[i], first_slot[i + 1]
        if sign < 0:
            for j in range(lo, hi):
                g = slots[j]
                if g < 0 or g >= width or not gpu_exists[v, g]:
                    error = BAD_SLOT
                elif gpu_free[v, g] < milli[i]:
                    error = GPU_OVER
            if error == OK and (cpu_free[v] < cpu[i] or memory_free[v] < memory[i]):
                error = HOST_OVER
            if error != OK:
                done = i
                break
        _apply_one(sign, v, lo, hi, slots, milli[i], cpu[i], memory[i], gpu_free,
                   gpu_tasks, cpu_free, memory_free, kind_count, node_version)  # fmt: skip
        delta -= sign * milli[i] * (hi - lo)
    if error != OK:
        for i in range(done):
            _apply_one(-sign, node[i], first_slot[i], first_slot[i + 1], slots, milli[i], cpu[i],
                       memory[i], gpu_free, gpu_tasks, cpu_free, memory_free, kind_count,
                       node_version)  # fmt: skip
        delta = 0
    return error, delta


@njit(cache=True)
def _apply_one(
    sign, v, lo, hi, slots, milli, cpu, memory,
    gpu_free, gpu_tasks, cpu_free, memory_free, kind_count, node_version,
):  # fmt: skip  # pragma: no cover
    for j in range(lo, hi):
        g = slots[j]
        gpu_free[v, g] += sign * milli
        gpu_tasks[v, g] -= sign
    cpu_free[v] += sign * cpu
    memory_free[v] += sign * memory
    count = hi - lo
    if count:
        kind = 0 if (count == 1 and milli < MILLI_PER_GPU) else count
        kind_count[v, kind] -= sign
    node_version[v] += 1


NOT_HELD = 4  # an id to release holds no row (or is listed twice)


@njit(cache=True)
def release_rows(
    ids, row_node, row_slots, row_count, row_milli, row_cpu, row_memory,
    gpu_free, gpu_tasks, cpu_free, memory_free, kind_count, node_version,
):  # fmt: skip  # pragma: no cover
    """Give back what row holders ``ids`` hold and forget them (``holders.RowHolders``),
    as ``release`` one by one. All or nothing: if an id holds no row or is listed twice,
    nothing changes. Returns (error code, the change of allocated GPU milli)."""
    n = len(ids)
    for i in range(n):  # check, marking each id seen (node -> -node - 2)
        j = ids[i]
        if j < 0 or j >= len(row_node) or row_node[j] < 0:
            for m in range(i):
                row_node[ids[m]] = -row_node[ids[m]] - 2
            return NOT_HELD, 0
        row_node[j] = -row_node[j] - 2
    delta = 0
    for i in range(n):  # ``_apply_one(+1, ...)`` written out: a call per id costs more
        j = ids[i]
        v = -row_node[j] - 2
        row_node[j] = -1
        count = row_count[j]
        milli = row_milli[j]
        for k in range(count):
            g = row_slots[j, k]
            gpu_free[v, g] += milli
            gpu_tasks[v, g] -= 1
        cpu_free[v] += row_cpu[j]
        memory_free[v] += row_memory[j]
        if count:
            kind_count[v, 0 if (count == 1 and milli < MILLI_PER_GPU) else count] -= 1
        node_version[v] += 1
        delta -= milli * count
    return OK, delta


@njit(cache=True)
def add_rows(
    ids, nodes, slots, milli, cpu, memory,
    row_node, row_slots, row_count, row_milli, row_cpu, row_memory,
):  # fmt: skip  # pragma: no cover
    """Record row holders ``ids`` (``holders.RowHolders.add``; ids are in the table's
    range): node, GPU slots (one row of ``slots`` each, -1 past them), milli, CPU, memory.
    All or nothing: False, and nothing recorded, if an id is held already or listed twice
    (or a node is negative)."""
    n = len(ids)
    k = slots.shape[1]
    width = row_slots.shape[1]
    for i in range(n):  # check, writing each node (a later duplicate sees it held)
        j = ids[i]
        if row_node[j] >= 0 or nodes[i] < 0:
            for m in range(i):
                row_node[ids[m]] = -1
            return False
        row_node[j] = nodes[i]
    for i in range(n):
        j = ids[i]
        for s in range(k):
            row_slots[j, s] = slots[i, s]
        for s in range(k, width):
            row_slots[j, s] = -1
        row_count[j] = k
        row_milli[j] = milli[i]
        row_cpu[j] = cpu[i]
        row_memory[j] = memory[i]
    return True
