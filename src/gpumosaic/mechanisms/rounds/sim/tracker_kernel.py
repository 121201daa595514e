"""The compiled half of the round timeline's figures (``tracker.RoundTracker``): one call a
round re-evaluates the nodes whose ``node_version`` moved and returns the cluster's
figures.

A node's fragmentation is ``placement.fragmentation.node_fragmentation``'s arithmetic in
its order (classes one after another, ``out += p * value``), so the values are that
function's, bit for bit; the cluster's sum is numpy's (``placement.kernel.pairwise_sum``).
A node's watts are ``PowerTracker.watts``' arithmetic, and the totals are kept by
difference (every figure is whole watts: exact in any order). Tests compare both with
the numpy functions.

Imported lazily (numba), like every kernel module; cached on disk (``kernel_cache``).
"""

from __future__ import annotations

import math

from gpumosaic.kernel_cache import njit
from gpumosaic.model.power import CORES_PER_SOCKET, SOCKET_FULL_W, SOCKET_IDLE_W, VCPU_PER_CORE
from gpumosaic.placement.kernel import pairwise_sum


@njit(cache=True, inline="always")
def _fragmentation(
    n, gpu_free, cpu_free, c_num_gpu, c_milli, c_cpu, weight, model_ok
):  # fmt: skip  # pragma: no cover
    width = gpu_free.shape[1]
    free_total = 0
    for g in range(width):
        free_total += gpu_free[n, g]
    free_f = float(free_total)
    out = 0.0
    for m in range(weight.shape[0]):
        if c_num_gpu[m] == 0:
            out += weight[m] * free_f
            continue
        fits = 0
        stranded = 0
        for g in range(width):
            v = gpu_free[n, g]
            if v >= c_milli[m]:
                fits += 1
            else:
                stranded += v
        if fits >= c_num_gpu[m] and cpu_free[n] >= c_cpu[m] and model_ok[n, m]:
            out += weight[m] * float(stranded)
        else:
            out += weight[m] * free_f
    return out


@njit(cache=True)
def refresh_nodes(
    gpu_free, cpu_free, node_version, tracked, with_frag, c_num_gpu, c_milli, c_cpu, weight,
    model_ok, gpu_exists, gpu_capacity, num_gpus, idle_w, full_w, sockets, cpu_capacity,
    node_frag, node_free, node_gpu_w, node_cpu_w, totals,
):  # fmt: skip  # pragma: no cover
    """Re-evaluate every node whose version moved since ``tracked``: its fragmentation
    (``with_frag``), free milli and watts. ``totals`` = [free milli, fragmentation, GPU
    watts, CPU watts] of the cluster, kept current (the fragmentation re-summed when a
    node changed)."""
    changed = 0
    for n in range(node_version.shape[0]):
        if tracked[n] == node_version[n]:
            continue
        tracked[n] = node_version[n]
        changed += 1
        if with_frag:
            node_frag[n] = _fragmentation(
                n, gpu_free, cpu_free, c_num_gpu, c_milli, c_cpu, weight, model_ok
            )
        free = 0
        busy = 0
        for g in range(gpu_free.shape[1]):
            free += gpu_free[n, g]
            if gpu_exists[n, g] and gpu_free[n, g] < gpu_capacity[n, g]:
                busy += 1
        totals[0] += free - node_free[n]
        node_free[n] = free
        gpu_w = busy * full_w[n] + (num_gpus[n] - busy) * idle_w[n]
        cores = math.ceil((cpu_capacity[n] - cpu_free[n]) / (1000 * VCPU_PER_CORE))
        active = min(math.ceil(cores / CORES_PER_SOCKET), sockets[n])
        cpu_w = active * SOCKET_FULL_W + (sockets[n] - active) * SOCKET_IDLE_W
        totals[2] += gpu_w - node_gpu_w[n]
        totals[3] += cpu_w - node_cpu_w[n]
        node_gpu_w[n] = gpu_w
        node_cpu_w[n] = cpu_w
    if changed and with_frag:
        totals[1] = pairwise_sum(node_frag, 0, node_frag.shape[0])
    return changed
