"""FGD's arithmetic, compiled: a node's per-class counts and fragmentation F
(``refresh_node``, kept by ``FragmentationTracker``) and the score of each candidate GPU
choice (``fgd_node``). See ``placement.kernel`` for why the sums and the sigmoid are
bit-identical to numpy's."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpumosaic.kernel_cache import njit, objmode
from gpumosaic.placement.kernel.arithmetic import pairwise_sum


@njit(cache=True)
def refresh_node(
    n, gpu_free, cpu_free, node_version, class_ok, c_cpu, c_num_gpu, weight,
    fit_table, below_table, fit_count, below, free, frag, tracked, buf,
):  # fmt: skip  # pragma: no cover
    """Recount node ``n``'s per-class counts and F from its GPUs (FragmentationTracker)."""
    m_count = weight.shape[0]
    width = gpu_free.shape[1]
    for m in range(m_count):
        fit_count[n, m] = 0
        below[n, m] = 0
    total = 0
    for g in range(width):
        v = gpu_free[n, g]
        total += v
        for m in range(m_count):
            fit_count[n, m] += fit_table[v, m]
            below[n, m] += below_table[v, m]
    free[n] = total
    cpu = cpu_free[n]
    for m in range(m_count):
        if class_ok[n, m] and cpu >= c_cpu[m] and fit_count[n, m] >= c_num_gpu[m]:
            buf[m] = below[n, m] * weight[m]
        else:
            buf[m] = total * weight[m]
    frag[n] = pairwise_sum(buf, 0, m_count)
    tracked[n] = node_version[n]


@njit(cache=True)
def refresh_stale(
    gpu_free, cpu_free, node_version, class_ok, c_cpu, c_num_gpu, weight,
    fit_table, below_table, fit_count, below, free, frag, tracked,
):  # fmt: skip  # pragma: no cover
    """Refresh every node whose version moved since it was last counted; how many."""
    buf = np.empty(max(weight.shape[0], 1))
    done = 0
    for n in range(node_version.shape[0]):
        if tracked[n] != node_version[n]:
            refresh_node(
                n, gpu_free, cpu_free, node_version, class_ok, c_cpu, c_num_gpu, weight,
                fit_table, below_table, fit_count, below, free, frag, tracked, buf,
            )  # fmt: skip
            done += 1
    return done


@njit(cache=True)
def fgd_node(
    n, num_gpu, milli, cpu, exact, gpu_free, cpu_free, class_ok, c_cpu, c_num_gpu, weight,
    fit_count, below, free, frag, d_fit, d_below, thresholds, buf, cand, xs,
):  # fmt: skip  # pragma: no cover
    """FGD's score of each candidate GPU choice on node ``n`` (into ``cand``: one per GPU
    slot for a fractional job, -inf where it does not fit; one for other jobs) and the
    best (first on ties): (score, slot). The node's counts must be current.

    ``d_fit``/``d_below``: for a fractional job, row f = the count change when a GPU with
    f free milli takes it (``FragmentationTracker.gpu_deltas``); otherwise one row, the
    change when one whole GPU is taken (times ``num_gpu`` here)."""
    m_count = weight.shape[0]
    cpu_after = cpu_free[n] - cpu
    fractional = num_gpu == 1 and milli < 1000
    width = gpu_free.shape[1] if fractional else 1
    before = frag[n]
    for g in range(width):
        if fractional:
            f = gpu_free[n, g]
            if f < milli:
                cand[g] = -np.inf
                xs[g] = 0.0
                continue
            same = -1  # an earlier GPU with as much free: the same choice, the same score
            for h in range(g):
                if cand[h] == 0.0 and gpu_free[n, h] == f:
                    same = h
                    break
            if same >= 0:
                xs[g] = xs[same]
                cand[g] = 0.0
                continue
            row, k, free_after = f, 1, free[n] - milli
        else:
            row, k, free_after = 0, num_gpu, free[n] - num_gpu * milli
        for m in range(m_count):
            fit = fit_count[n, m] + d_fit[row, m] * k
            if class_ok[n, m] and cpu_after >= c_cpu[m] and fit >= c_num_gpu[m]:
                buf[m] = (below[n, m] + d_below[row, m] * k) * weight[m]
            else:
                buf[m] = free_after * weight[m]
        xs[g] = (before - pairwise_sum(buf, 0, m_count)) / 1000.0
        cand[g] = 0.0
    if exact:
        with objmode():
            numpy_sigmoid(xs, width)
    best = -np.inf
    best_slot = 0
    for g in range(width):
        if cand[g] == -np.inf:
            continue
        score = xs[g] if exact else float(np.searchsorted(thresholds, xs[g], side="right"))
        cand[g] = score
        if score > best:
            best = score
            best_slot = g
    return best, best_slot


def numpy_sigmoid(xs: npt.NDArray[np.float64], width: int) -> None:
    """``xs[:width] = 1 / (1 + exp(-x)) * 100`` with numpy's exp (fgd-exact's float score:
    numpy's SIMD exp and the C library's differ in the last bit, and exact scores compare
    floats, so the score is numpy's as it always was)."""
    x = xs[:width]
    x[:] = 1.0 / (1.0 + np.exp(-x)) * 100
