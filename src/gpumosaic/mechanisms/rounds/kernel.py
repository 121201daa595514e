"""Compiled steps of the lease book (numba): the symmetric shortcut of a whole round
(``place_symmetric``) and a round's whole lease start when every entity is a single job
(``start_singles``: extensions, releases, order, the shortcut, per-row bookkeeping).

Import lazily (numba's import costs ~0.2 s of CPU); compiled once per machine into
numba's cache (``cache=True``).
"""

from __future__ import annotations

import numpy as np

from gpumosaic.kernel_cache import njit
from gpumosaic.model.bulk_kernel import release_rows
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


# ``start_singles``' outcome codes.
STARTED = 0
GENERAL = 1  # something only the lease book's general path handles; nothing changed
TAKEN = 2  # a row to place anew holds GPUs already (a bookkeeping bug); nothing changed


@njit(cache=True)
def start_singles(
    rows_a, rows_b, types, active, held_type, held_gang, held_list, held_known, keep,
    num_gpu, gpu_milli, cpu_milli, memory_mib, symmetric, type_nodes, type_start, gpu_free,
    gpu_tasks, cpu_free, memory_free, kind_count, node_version, row_node, row_slots,
    row_count, row_milli, row_cpu, row_memory, extended, got, rest, out_placed, out_extended,
):  # fmt: skip  # pragma: no cover
    """A round's lease start when every chosen entity is a single job (``LeaseBook
    .start_round``'s common case), in one pass: entity ``i`` is job row ``rows_a[i]`` on
    type ``types[i]``, in priority order; ``held_type``/``held_gang`` are the lease book's
    per-row leases (rows ``< len(active)``), all held as rows of the state
    (``model.holders``). ``held_list[:held_known[0]]`` lists the rows that hold a lease
    (``held_known[0]`` < 0: not known, found here by a scan of ``held_type``); it is kept
    up to date (or marked not known when the caller places a rest). ``keep``: all False
    (scratch of ``len(active)``, left all False).

    As the general path does, in order: a lease on the same type is extended
    (``extended[i]``); every other held row is released (as ``bulk_kernel.release_rows``;
    the order of releases changes no figure); the others are ordered by GPU milli asked,
    largest first (stable); those asking whole GPUs of a symmetric type are placed by
    ``place_symmetric`` and their rows recorded; the positions of the rest, in that order,
    go to ``rest`` for the general placement. ``got[i]``: entity ``i`` holds GPUs (the
    rest's are set by the caller); ``out_placed``/``out_extended``: the positions that got
    GPUs, ascending, and whether each was extended (valid when no rest).

    Returns (code, opportunities, extensions, released, released milli, fast placed,
    fast failed, rest). ``GENERAL`` (a pair, a gang to release or to place, a lease held
    as an ``Assignment``) and ``TAKEN`` change nothing (but the list of held rows)."""
    n = len(rows_a)
    n_rows = len(active)
    for i in range(n):
        if rows_b[i] >= 0:
            return GENERAL, 0, 0, 0, 0, 0, 0, 0
    listed = held_known[0]
    if listed < 0:  # the general path ran: list the held rows again
        listed = 0
        for r in range(n_rows):
            if held_type[r] >= 0:
                held_list[listed] = r
                listed += 1
        held_known[0] = listed
    for i in range(n):
        r = rows_a[i]
        extended[i] = held_type[r] == types[i]
        if extended[i]:
            keep[r] = True
    opportunities = 0
    released = 0
    code = STARTED
    for j in range(listed):
        r = held_list[j]
        opportunities += active[r]
        if not keep[r]:
            if held_gang[r] or r >= len(row_node) or row_node[r] < 0:
                code = GENERAL
            released += 1
    # The entities placed anew, largest GPU milli first (stable: priority among equals).
    fresh = np.empty(n, dtype=np.int64)
    n_fresh = 0
    for i in range(n):
        if not extended[i]:
            fresh[n_fresh] = i
            n_fresh += 1
    fresh = fresh[:n_fresh]
    demand = np.empty(n_fresh, dtype=np.int64)
    for j in range(n_fresh):
        r = rows_a[fresh[j]]
        demand[j] = -num_gpu[r] * gpu_milli[r]
    fresh = fresh[np.argsort(demand, kind="mergesort")]
    n_fast = 0
    for j in range(n_fresh):
        i = fresh[j]
        r = rows_a[i]
        if symmetric[types[i]] and gpu_milli[r] == MILLI_PER_GPU:
            if code != STARTED:
                pass
            elif num_gpu[r] != 1:
                code = GENERAL
            elif row_node[r] >= 0 and (held_type[r] < 0 or keep[r]):
                code = TAKEN
            n_fast += 1
    if code != STARTED:
        for i in range(n):
            keep[rows_a[i]] = False
        return code, 0, 0, 0, 0, 0, 0, 0
    # Checked: from here on every step succeeds.
    extensions = 0
    for i in range(n):
        if extended[i]:
            got[i] = True
            extensions += 1
        else:
            got[i] = False
    ids = np.empty(released, dtype=np.int64)
    m = 0
    for j in range(listed):
        r = held_list[j]
        if not keep[r]:
            ids[m] = r
            m += 1
            held_type[r] = -1
            held_gang[r] = False
    for i in range(n):
        keep[rows_a[i]] = False
    _, released_milli = release_rows(
        ids, row_node, row_slots, row_count, row_milli, row_cpu, row_memory, gpu_free,
        gpu_tasks, cpu_free, memory_free, kind_count, node_version,
    )  # fmt: skip
    fast_pos = np.empty(n_fast, dtype=np.int64)
    fast_types = np.empty(n_fast, dtype=np.int64)
    fast_rows = np.empty(n_fast, dtype=np.int64)
    fast_cpu = np.empty(n_fast, dtype=np.int64)
    fast_memory = np.empty(n_fast, dtype=np.int64)
    n_rest = 0
    f = 0
    for j in range(n_fresh):
        i = fresh[j]
        r = rows_a[i]
        if symmetric[types[i]] and gpu_milli[r] == MILLI_PER_GPU:
            fast_pos[f] = i
            fast_types[f] = types[i]
            fast_rows[f] = r
            fast_cpu[f] = cpu_milli[r]
            fast_memory[f] = memory_mib[r]
            f += 1
        else:
            rest[n_rest] = i
            n_rest += 1
    ones = np.ones(n_fast, dtype=np.int64)
    yes = np.ones(n_fast, dtype=np.bool_)
    out_first = np.empty(n_fast, dtype=np.int64)
    out_nodes = np.empty(n_fast, dtype=np.int64)
    placed, _ = place_symmetric(
        fast_types, ones, fast_cpu, fast_memory, yes, type_nodes, type_start, gpu_free,
        gpu_tasks, cpu_free, memory_free, kind_count, node_version, out_first, out_nodes,
        fast_rows, yes, row_node, row_slots, row_count, row_milli, row_cpu, row_memory,
    )  # fmt: skip
    for f in range(n_fast):
        if out_first[f] >= 0:
            got[fast_pos[f]] = True
            held_type[fast_rows[f]] = fast_types[f]
            held_gang[fast_rows[f]] = False
    m = 0
    for i in range(n):
        if got[i]:
            out_placed[m] = i
            out_extended[m] = extended[i]
            held_list[m] = rows_a[i]  # the rows holding a lease from now on
            m += 1
    held_known[0] = -1 if n_rest else m  # the caller's placements change held_type
    return (
        STARTED, opportunities, extensions, released, released_milli, placed,
        n_fast - placed, n_rest,
    )  # fmt: skip
