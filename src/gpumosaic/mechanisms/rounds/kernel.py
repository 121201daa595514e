"""Compiled step of the round mechanism (numba): the symmetric shortcut of a whole round.

Import lazily (numba's import costs ~0.2 s of CPU); compiled once per machine into
numba's cache (``cache=True``).
"""

from __future__ import annotations

import numpy as np

from gpumosaic.kernel_cache import njit
from gpumosaic.model.gpu import MILLI_PER_GPU


@njit(cache=True)
def place_symmetric(
    types, num_gpu, cpu, memory, eligible, type_nodes, type_start,
    gpu_free, gpu_tasks, cpu_free, memory_free, kind_count, node_version, out_first, out_nodes,
    holders, as_row, row_node, row_slots, row_count, row_milli, row_cpu, row_memory,
):  # fmt: skip  # pragma: no cover
    """Entities in order: entity ``i`` wants ``num_gpu[i]`` whole GPUs of symmetric type
    ``types[i]`` (nodes ``type_nodes[type_start[t]:type_start[t + 1]]``, ascending, one
    GPU each) with ``cpu[i]`` and ``memory[i]`` per GPU; it takes the lowest-index nodes
    whose GPU is untouched and whose CPU and memory fit, all of them or none
    (``eligible[i]`` False: it may not have several nodes). Allocates each part as
    ``ClusterState.allocate`` does (one whole GPU: kind 1) and writes entity ``i``'s nodes
    to ``out_nodes[out_first[i]:out_first[i] + num_gpu[i]]`` (``out_first[i]`` = -1: it
    found none). An entity with ``as_row`` (one GPU, holder id >= 0) is also recorded as
    row ``holders[i]`` of the state's row holders (``model.holders``), which must be free.
    Returns (entities placed, rows recorded), or (-1, 0) and no change when a row is taken."""
    for i in range(len(types)):
        if as_row[i] and row_node[holders[i]] >= 0:
            return -1, 0
    n_types = len(type_start) - 1
    rows = 0
    cursor = type_start[:n_types].copy()  # nodes before it have their GPU taken
    widest = 1
    for i in range(len(types)):
        widest = max(widest, num_gpu[i])
    picked = np.empty(widest, dtype=np.int64)
    pending = 0
    placed = 0
    for i in range(len(types)):
        out_first[i] = -1
        if not eligible[i]:
            continue
        t = types[i]
        k = num_gpu[i]
        end = type_start[t + 1]
        c = cursor[t]
        while c < end and gpu_free[type_nodes[c], 0] != MILLI_PER_GPU:
            c += 1
        cursor[t] = c
        found = 0
        j = c
        while j < end and found < k:
            v = type_nodes[j]
            if (
                gpu_free[v, 0] == MILLI_PER_GPU
                and cpu_free[v] >= cpu[i]
                and memory_free[v] >= memory[i]
            ):
                picked[found] = v
                found += 1
            j += 1
        if found < k:
            continue
        out_first[i] = pending
        for f in range(k):
            v = picked[f]
            gpu_free[v, 0] -= MILLI_PER_GPU
            gpu_tasks[v, 0] += 1
            cpu_free[v] -= cpu[i]
            memory_free[v] -= memory[i]
            kind_count[v, 1] += 1
            node_version[v] += 1
            out_nodes[pending + f] = v
        if as_row[i]:
            h = holders[i]
            row_node[h] = picked[0]
            row_slots[h, 0] = 0
            row_slots[h, 1:] = -1
            row_count[h] = 1
            row_milli[h] = MILLI_PER_GPU
            row_cpu[h] = cpu[i]
            row_memory[h] = memory[i]
            rows += 1
        pending += k
        placed += 1
    return placed, rows
