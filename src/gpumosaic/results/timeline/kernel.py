"""The compiled half of a run's timeline (``results/timeline/log.py``): replay a run's log
of allocations and releases on copies of the starting free GPU milli and CPU, and after
each sample's changes re-count FGD's F of the nodes they touched and sum F over the
cluster. F comes from ``placement.kernel.refresh_node`` -- the function the FGD scorer and
``FragmentationTracker`` use -- and the sum from ``placement.kernel.pairwise_sum`` (numpy's
order for ``frag.sum()``), so every figure is the tracker's, bit for bit.

Imported lazily (numba), like ``placement.kernel``; its cache is keyed by every kernel
source (``kernel_cache``). The timeline test compares every sample with the tracker bit
for bit.
"""

from __future__ import annotations

import numpy as np

from gpumosaic.kernel_cache import njit
from gpumosaic.placement.kernel import pairwise_sum, refresh_node


@njit(cache=True)
def replay_samples(
    gpu_free, cpu_free, num_gpus, part_node, part_milli, part_cpu, part_slot_at, slots,
    log, ends, with_frag, class_ok, c_cpu, c_num_gpu, weight, fit_table, below_table,
    frag_total, changed_sample, changed_node, changed_busy, changed_cpu_free,
):  # fmt: skip  # pragma: no cover
    """Apply ``log`` (``+p + 1``: part ``p`` allocated, ``-(p + 1)``: released) to
    ``gpu_free``/``cpu_free`` in order; sample ``s`` sees the first ``ends[s]`` entries.

    Per sample (``with_frag``): the cluster's summed F into ``frag_total[s]``. Per node a
    sample's entries touched (each once per sample, in first-touch order): the sample, the
    node, its GPUs holding any allocation (slots below ``num_gpus`` with less than 1000
    milli free) and its free CPU, from position 0 of the ``changed_*`` arrays on; returns
    how many were written."""
    num_nodes = gpu_free.shape[0]
    m_count = weight.shape[0]
    fit_count = np.zeros((num_nodes, m_count), dtype=np.int64)
    below = np.zeros((num_nodes, m_count), dtype=np.int64)
    free = np.zeros(num_nodes, dtype=np.int64)
    frag = np.zeros(num_nodes, dtype=np.float64)
    version = np.zeros(num_nodes, dtype=np.int64)
    tracked = np.full(num_nodes, -1, dtype=np.int64)
    buf = np.empty(max(m_count, 1))
    seen = np.full(num_nodes, -1, dtype=np.int64)  # the last sample that touched a node
    touched = np.empty(num_nodes, dtype=np.int64)
    if with_frag:
        for n in range(num_nodes):
            refresh_node(
                n, gpu_free, cpu_free, version, class_ok, c_cpu, c_num_gpu, weight,
                fit_table, below_table, fit_count, below, free, frag, tracked, buf,
            )  # fmt: skip
    written = 0
    at = 0
    for s in range(ends.shape[0]):
        count = 0
        while at < ends[s]:
            entry = log[at]
            at += 1
            sign = 1 if entry > 0 else -1
            p = entry - 1 if entry > 0 else -entry - 1
            n = part_node[p]
            milli = part_milli[p] * sign
            for k in range(part_slot_at[p], part_slot_at[p + 1]):
                gpu_free[n, slots[k]] -= milli
            cpu_free[n] -= part_cpu[p] * sign
            version[n] += 1
            if seen[n] != s:
                seen[n] = s
                touched[count] = n
                count += 1
        for i in range(count):
            n = touched[i]
            if with_frag:
                refresh_node(
                    n, gpu_free, cpu_free, version, class_ok, c_cpu, c_num_gpu, weight,
                    fit_table, below_table, fit_count, below, free, frag, tracked, buf,
                )  # fmt: skip
            busy = 0
            for g in range(num_gpus[n]):
                if gpu_free[n, g] != 1000:
                    busy += 1
            changed_sample[written] = s
            changed_node[written] = n
            changed_busy[written] = busy
            changed_cpu_free[written] = cpu_free[n]
            written += 1
        if with_frag:
            frag_total[s] = pairwise_sum(frag, 0, num_nodes)
    return written
