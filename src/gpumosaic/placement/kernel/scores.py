"""Every scorer's arithmetic, compiled: the raw score of one node for one job shape and
the GPU a fractional job would take there (``score_node``, one branch per scorer kind),
and the reference's min-max normalization and weighted sum (``weighted_total``).

The formulas are the reference's, written per node in the order numpy evaluated them
before (``scorers/*.py`` document each): integer parts in int64, float parts in the same
operations on the same doubles, so the scores are bit-identical. Arguments are grouped in
tuples the strategy builds once per job shape (``scorers.base.KernelInputs``):

- ``job``: (num_gpu, milli, cpu, memory), milli = 0 for a CPU-only job;
- ``cl``: the cluster's arrays (gpu_free, gpu_tasks, cpu_free, memory_free, kind_count,
  node_version, num_gpus, gpu_capacity, cpu_capacity);
- ``fg``: FGD's tracker counts and tables (``fgd.fgd_node``);
- ``pw``: PWR's per-node constants (GPU full - idle watts, CPU sockets).
"""

from __future__ import annotations

import numpy as np

from gpumosaic.kernel_cache import njit
from gpumosaic.model.power import CORES_PER_SOCKET, SOCKET_FULL_W, SOCKET_IDLE_W, VCPU_PER_CORE
from gpumosaic.placement.kernel.fgd import fgd_node, refresh_node

# Scorer kinds (``Scorer.kernel_kind``).
FGD = 0
WORSTFIT = 1
BESTFIT = 2
DOTPROD = 3
GPUCLUSTERING = 4
GPUPACKING = 5
PWR = 6
FIRSTFIT = 7
FGD_EXACT = 8

# The reference normalizes resource vectors by the largest node of the Alibaba cluster.
MAX_SPEC_CPU = 128_000  # milli-CPU
MAX_SPEC_GPU = 8_000  # milli-GPU (8 GPUs)
MAX_SCORE = 100
QUARTER = MAX_SCORE // 4
HALF = MAX_SCORE // 2
THIRD = MAX_SCORE // 3
_MILLI_PER_CPU_CORE = 1000 * VCPU_PER_CORE
_SOCKET_STEP_W = SOCKET_FULL_W - SOCKET_IDLE_W


# -- GPU choices inside a node (placement.gpu_choice documents the rules) -----------
@njit(cache=True)
def best_fit_slot(gpu_free, n, milli):  # pragma: no cover
    """The fitting GPU with the least free milli (first on ties), -1 if none fits."""
    slot = -1
    least = 0
    for g in range(gpu_free.shape[1]):
        f = gpu_free[n, g]
        if f >= milli and (slot < 0 or f < least):
            least = f
            slot = g
    return slot


@njit(cache=True)
def first_fit_slot(gpu_free, n, milli):  # pragma: no cover
    """The lowest-index fitting GPU, -1 if none fits."""
    for g in range(gpu_free.shape[1]):
        if gpu_free[n, g] >= milli:
            return g
    return -1


@njit(cache=True)
def _gpu_sum(gpu_free, n):  # pragma: no cover
    total = 0
    for g in range(gpu_free.shape[1]):
        total += gpu_free[n, g]
    return total


# -- one scorer each ----------------------------------------------------------------
@njit(cache=True)
def worstfit_node(n, num_gpu, milli, cpu, cpu_scale, gpu_free, cpu_free):  # pragma: no cover
    """Worst fit's score of node ``n`` (GPU milli left, then CPU left, packed in one exact
    float) and, for a fractional job, the fitting GPU with the most free milli."""
    width = gpu_free.shape[1]
    total = 0
    slot = -1
    most = -1
    for g in range(width):
        v = gpu_free[n, g]
        total += v
        if v >= milli and v > most:
            most = v
            slot = g
    left = total - (num_gpu * milli if num_gpu else 0)
    score = left * cpu_scale + (cpu_free[n] - cpu)
    return score, slot


@njit(cache=True)
def bestfit_node(n, num_gpu, milli, cpu, gpu_free, cpu_free):  # pragma: no cover
    """trunc(100 * (1 - [0.5 * (cpu free - cpu) / 128000 + 0.5 * (gpu free - gpu) / 8000]))."""
    cpu_left = (cpu_free[n] - cpu) / MAX_SPEC_CPU * 0.5
    gpu_left = (_gpu_sum(gpu_free, n) - num_gpu * milli) / MAX_SPEC_GPU * 0.5
    return np.trunc((1.0 - (cpu_left + gpu_left)) * MAX_SCORE)


@njit(cache=True)
def dotprod_node(n, num_gpu, milli, cpu, gpu_free, cpu_free):  # pragma: no cover
    """trunc(100 * (1 - node . job / 2)), both vectors scaled by the largest node."""
    node_cpu = cpu_free[n] / MAX_SPEC_CPU
    node_gpu = _gpu_sum(gpu_free, n) / MAX_SPEC_GPU
    dot = node_cpu * (cpu / MAX_SPEC_CPU) + node_gpu * ((num_gpu * milli) / MAX_SPEC_GPU)
    return np.trunc(MAX_SCORE * (1.0 - dot / 2))


@njit(cache=True)
def gpuclustering_node(n, num_gpu, milli, gpu_free, kind_count):  # pragma: no cover
    """A band by the kinds of GPU task on the node (only the job's kind 75, among others
    50, none 25, only others 0) + 25 * (8000 - free milli) // 8000 (toward zero)."""
    if num_gpu == 0:
        return 0.0
    kind = 0 if num_gpu == 1 and milli < 1000 else num_gpu  # model.state.SHARING_KIND = 0
    kinds = 0
    for k in range(kind_count.shape[1]):
        if kind_count[n, k] > 0:
            kinds += 1
    own = kind < kind_count.shape[1] and kind_count[n, kind] > 0
    band = (3 if kinds == 1 else 2) if own else (1 if kinds == 0 else 0)
    used = QUARTER * (MAX_SPEC_GPU - _gpu_sum(gpu_free, n))
    within = used // MAX_SPEC_GPU if used >= 0 else -(-used // MAX_SPEC_GPU)  # Go's int64 /
    return float(within + band * QUARTER)


@njit(cache=True)
def gpupacking_node(n, num_gpu, milli, gpu_free, num_gpus):  # pragma: no cover
    """Idle node: max(33 - its GPUs, its GPUs); fractional job on a partly used GPU
    (best fit): max(100 - (free% of it) // 10, 50); else max(50 - GPUs it takes, 33)."""
    if num_gpu == 0:
        return 0.0
    fully_free = 0
    for g in range(gpu_free.shape[1]):
        if gpu_free[n, g] >= 1000:
            fully_free += 1
    if fully_free == num_gpus[n]:
        return float(max(THIRD - fully_free, fully_free))
    if num_gpu == 1 and milli < 1000:
        slot = best_fit_slot(gpu_free, n, milli)
        chosen = gpu_free[n, slot] if slot >= 0 else 1001  # none fits: not a partly used GPU
        if chosen >= 1000:
            return float(max(HALF - 1, THIRD))
        return float(max(MAX_SCORE - (chosen * 100 // 1000) // 10, HALF))
    return float(max(HALF - num_gpu, THIRD))


@njit(cache=True)
def sockets(cpu_milli):  # pragma: no cover
    """CPU sockets busy for ``cpu_milli`` (``model.power.sockets``, one node)."""
    cores = np.ceil(cpu_milli / _MILLI_PER_CPU_CORE)
    return np.int64(np.ceil(cores / CORES_PER_SOCKET))


@njit(cache=True)
def pwr_node(
    n, num_gpu, milli, cpu, gpu_free, gpu_capacity, cpu_free, cpu_capacity, step_w, node_sockets,
    cand,
):  # fmt: skip  # pragma: no cover
    """Power before - power after (W, <= 0) of each candidate GPU choice into ``cand``
    (one per GPU for a fractional job, -inf where it does not fit; one otherwise) and the
    best (first on ties): (score, slot). A busy GPU adds nothing, an idle one its
    full - idle watts; a socket turning active adds 120 - 15 W."""
    used = cpu_capacity[n] - cpu_free[n]
    total = node_sockets[n]
    before = min(sockets(used), total)
    after = min(sockets(used + cpu), total)
    cpu_w = (after - before) * _SOCKET_STEP_W
    step = step_w[n]
    if not (num_gpu == 1 and milli < 1000):
        score = -np.trunc(cpu_w + num_gpu * step)
        cand[0] = score
        return score, 0
    best = -np.inf
    slot = 0
    for g in range(gpu_free.shape[1]):
        f = gpu_free[n, g]
        if f >= milli:
            score = -np.trunc(cpu_w + (step if f >= gpu_capacity[n, g] else 0.0))
        else:
            score = -np.inf
        cand[g] = score
        if score > best:
            best = score
            slot = g
    return best, slot


# -- any scorer ---------------------------------------------------------------------
@njit(cache=True)
def score_node(kind, n, job, cl, fg, pw, cpu_scale, buf, cand, xs):  # pragma: no cover
    """(raw score, GPU slot a fractional job takes) of node ``n`` for a scorer ``kind``;
    FGD and PWR also write each candidate GPU's score into ``cand``."""
    num_gpu, milli, cpu, _ = job
    gpu_free, _, cpu_free, _, kind_count, node_version, num_gpus, gpu_capacity, cpu_capacity = cl
    if kind in (FGD, FGD_EXACT):
        (class_ok, c_cpu, c_num_gpu, weight, fit_table, below_table, fit_count, below, free,
         frag, tracked, d_fit, d_below, thresholds) = fg  # fmt: skip
        if tracked[n] != node_version[n]:
            refresh_node(
                n, gpu_free, cpu_free, node_version, class_ok, c_cpu, c_num_gpu, weight,
                fit_table, below_table, fit_count, below, free, frag, tracked, buf,
            )  # fmt: skip
        return fgd_node(
            n, num_gpu, milli, cpu, kind == FGD_EXACT, gpu_free, cpu_free, class_ok, c_cpu,
            c_num_gpu, weight, fit_count, below, free, frag, d_fit, d_below, thresholds, buf,
            cand, xs,
        )  # fmt: skip
    if kind == WORSTFIT:
        return worstfit_node(n, num_gpu, milli, cpu, cpu_scale, gpu_free, cpu_free)
    if kind == PWR:
        return pwr_node(
            n, num_gpu, milli, cpu, gpu_free, gpu_capacity, cpu_free, cpu_capacity, pw[0],
            pw[1], cand,
        )  # fmt: skip
    return plain_node(kind, n, num_gpu, milli, cpu, gpu_free, cpu_free, kind_count, num_gpus)


@njit(cache=True)
def plain_node(
    kind, n, num_gpu, milli, cpu, gpu_free, cpu_free, kind_count, num_gpus
):  # pragma: no cover
    """(raw score, GPU slot) of node ``n`` for first fit, BestFit, DotProd, GpuClustering
    or GpuPacking: the scorers with one score per node and no candidate GPUs."""
    fractional = num_gpu == 1 and milli < 1000
    if kind == FIRSTFIT:  # unique per node: the random tie-break never applies
        return -float(n), (first_fit_slot(gpu_free, n, milli) if fractional else -1)
    if kind == BESTFIT:
        score = bestfit_node(n, num_gpu, milli, cpu, gpu_free, cpu_free)
    elif kind == DOTPROD:
        score = dotprod_node(n, num_gpu, milli, cpu, gpu_free, cpu_free)
    elif kind == GPUCLUSTERING:
        score = gpuclustering_node(n, num_gpu, milli, gpu_free, kind_count)
    else:  # GPUPACKING
        score = gpupacking_node(n, num_gpu, milli, gpu_free, num_gpus)
    return score, (best_fit_slot(gpu_free, n, milli) if fractional else -1)


@njit(cache=True)
def score_many(
    kind, m, chooser, nodes, positions, k, job, cl, fg, pw, cpu_scale, buf, cand, xs, raw, slot
):  # pragma: no cover
    """``score_node`` of ``nodes[:k]`` into ``raw[m, positions[i]]`` (and ``slot`` for the
    chooser ``m``): the same arithmetic, with the scorer's branch and its arrays taken
    once per batch rather than per node (a per-node call of the generic ``score_node``
    passes every tuple of arrays and costs ~20x the arithmetic of worst fit)."""
    num_gpu, milli, cpu, _ = job
    gpu_free, _, cpu_free, _, kind_count, node_version, num_gpus, gpu_capacity, cpu_capacity = cl
    own = m == chooser
    if kind in (FGD, FGD_EXACT):
        (class_ok, c_cpu, c_num_gpu, weight, fit_table, below_table, fit_count, below, free,
         frag, tracked, d_fit, d_below, thresholds) = fg  # fmt: skip
        exact = kind == FGD_EXACT
        for i in range(k):
            n = nodes[i]
            if tracked[n] != node_version[n]:
                refresh_node(
                    n, gpu_free, cpu_free, node_version, class_ok, c_cpu, c_num_gpu, weight,
                    fit_table, below_table, fit_count, below, free, frag, tracked, buf,
                )  # fmt: skip
            score, s = fgd_node(
                n, num_gpu, milli, cpu, exact, gpu_free, cpu_free, class_ok, c_cpu,
                c_num_gpu, weight, fit_count, below, free, frag, d_fit, d_below, thresholds,
                buf, cand, xs,
            )  # fmt: skip
            raw[m, positions[i]] = score
            if own:
                slot[positions[i]] = s
        return
    if kind == WORSTFIT:
        for i in range(k):
            score, s = worstfit_node(nodes[i], num_gpu, milli, cpu, cpu_scale, gpu_free, cpu_free)
            raw[m, positions[i]] = score
            if own:
                slot[positions[i]] = s
        return
    if kind == PWR:
        step_w, node_sockets = pw
        for i in range(k):
            score, s = pwr_node(
                nodes[i], num_gpu, milli, cpu, gpu_free, gpu_capacity, cpu_free, cpu_capacity,
                step_w, node_sockets, cand,
            )  # fmt: skip
            raw[m, positions[i]] = score
            if own:
                slot[positions[i]] = s
        return
    for i in range(k):
        score, s = plain_node(
            kind, nodes[i], num_gpu, milli, cpu, gpu_free, cpu_free, kind_count, num_gpus
        )
        raw[m, positions[i]] = score
        if own:
            slot[positions[i]] = s


@njit(cache=True)
def score_nodes(
    kind, nodes, job, cl, fg, pw, cpu_scale, out_raw, out_slot, out_cand
):  # pragma: no cover
    """``score_node`` for each of ``nodes``: raw score, slot and (FGD, PWR) the candidate
    scores (K, C) (-inf where a GPU does not fit or the scorer has one candidate)."""
    buf = np.empty(max(fg[3].shape[0], 1))
    xs = np.empty(max(out_cand.shape[1], 1))
    for i in range(nodes.shape[0]):
        out_cand[i, :] = -np.inf
        out_raw[i], out_slot[i] = score_node(
            kind, nodes[i], job, cl, fg, pw, cpu_scale, buf, out_cand[i], xs
        )


# -- normalization and the weighted sum ---------------------------------------------
@njit(cache=True)
def minmax_value(s, lo, span):  # pragma: no cover
    """One score normalized: ``floor((s - lowest) * 100 / (highest - lowest))``."""
    return np.floor((s - lo) * MAX_SCORE / span)


@njit(cache=True)
def minmax(vals, k, all_equal):  # pragma: no cover
    """In place on ``vals[:k]``: the reference's integer min-max normalization to 0..100,
    ``floor((s - lowest) * 100 / (highest - lowest))``; ``all_equal`` when the range is 0."""
    if k == 0:
        return
    lo = vals[0]
    hi = vals[0]
    for i in range(1, k):
        lo = min(lo, vals[i])
        hi = max(hi, vals[i])
    if hi == lo:
        for i in range(k):
            vals[i] = all_equal
        return
    span = hi - lo
    for i in range(k):
        vals[i] = minmax_value(vals[i], lo, span)


@njit(cache=True)
def weighted_total(raw, cols, k, weights, all_equal, tmp, total):  # pragma: no cover
    """``total[i] = sum over members m of weights[m] * norm_m(raw[m, cols[i]])`` for
    i < k, members added in order; norm_m is ``minmax`` over the k columns where
    ``all_equal[m]`` is a number, the identity where it is NaN."""
    for i in range(k):
        total[i] = 0.0
    for m in range(raw.shape[0]):
        for i in range(k):
            tmp[i] = raw[m, cols[i]]
        if not np.isnan(all_equal[m]):
            minmax(tmp, k, all_equal[m])
        w = weights[m]
        for i in range(k):
            total[i] += w * tmp[i]
