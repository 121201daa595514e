"""Compiled placement steps (numba): the one implementation of FGD's fragmentation and
score, of the worst-fit ("strided") score, and of the per-job step of a placement.

Every path that places through a FGD or worst-fit strategy (fill, event replay, rounds,
the live extender) runs these functions: ``ScoredPlacement`` calls ``place_run`` for one
job (``choose``) or for a run of same-shape jobs that it also allocates
(``placement.batch.place_many``), and ``FragmentationTracker`` refreshes nodes with
``refresh_stale``. Import this module lazily (numba costs ~0.2 s of CPU to import and
~0.2 s to load the cached machine code on first call); it is compiled once per machine
into numba's cache (``cache=True``: ``__pycache__`` beside this file, or numba's user cache
directory where that is read-only; ``NUMBA_CACHE_DIR`` overrides).

Same numbers as the numpy formulas they replace, bit for bit:

- F sums its per-class terms with numpy's pairwise summation (``pairwise_sum``), the
  order ``ndarray.sum`` uses on a contiguous row, so a node in the same state always gets
  the same F and FGD's Delta = 0 stays exact;
- the truncated FGD score ``trunc(100 * sigmoid(x))`` is read from the 100 thresholds of
  x where numpy's own ``1 / (1 + np.exp(-x)) * 100`` reaches each integer
  (``score_thresholds``): numpy's SIMD exp and the C library's exp differ in the last bit
  for ~2% of inputs, and a threshold table is exact for either. ``fgd-exact`` keeps the
  float, so its sigmoid is numpy's own, called from the kernel (``numpy_sigmoid``, in
  object mode: a few microseconds per re-scored node, paid by that variant only).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit, objmode

from gpumosaic.model.gpu import MILLI_PER_GPU

# Scorer kinds ``place_run`` knows (``Scorer.kernel_kind``).
FGD = 0
WORSTFIT = 1

_NEG_INF = -np.inf


# -- arithmetic --------------------------------------------------------------------
@njit(cache=True)
def _block_sum(a, lo, n):  # pragma: no cover
    """numpy's pairwise sum of up to 128 elements: 8 accumulators, then the rest."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    end = n - n % 8
    while i < end:
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@njit(cache=True)
def _halves_sum(a, lo, n):  # pragma: no cover
    """Above 128 elements numpy sums the two halves (split at a multiple of 8) and adds
    them; evaluated here with an explicit stack (numba's cache and recursion do not mix)."""
    los = np.empty(64, dtype=np.int64)
    ns = np.empty(64, dtype=np.int64)
    stage = np.zeros(64, dtype=np.int64)
    left = np.empty(64)
    top = 0
    los[0] = lo
    ns[0] = n
    ret = 0.0
    while top >= 0:
        start, m = los[top], ns[top]
        if m <= 128:
            ret = _block_sum(a, start, m)
            top -= 1
            continue
        half = m // 2
        half -= half % 8
        if stage[top] == 0:
            stage[top] = 1
            top += 1
            los[top], ns[top], stage[top] = start, half, 0
        elif stage[top] == 1:
            left[top] = ret
            stage[top] = 2
            top += 1
            los[top], ns[top], stage[top] = start + half, m - half, 0
        else:
            ret = left[top] + ret
            top -= 1
    return ret


@njit(cache=True)
def pairwise_sum(a, lo, n):  # pragma: no cover
    """``a[lo:lo + n].sum()`` in numpy's order (its ``pairwise_sum``: 8 accumulators over
    blocks of up to 128, halves above that), so the result is bit-identical."""
    if n <= 128:
        return _block_sum(a, lo, n)
    return _halves_sum(a, lo, n)


def score_thresholds() -> npt.NDArray[np.float64]:
    """T[s - 1] = the least double x with ``trunc(1 / (1 + np.exp(-x)) * 100) >= s``, for
    s = 1..100, found by bisection over the doubles with numpy's own formula; the truncated
    FGD score of x is then ``searchsorted(T, x, 'right')``. (The formula is monotone: a
    test checks the table against it on millions of x and around every threshold.)"""
    target = np.arange(1, 101, dtype=np.float64)
    # Work on the doubles' order-preserving integer keys: bisection ends on adjacent doubles.
    lo = np.full(100, _key(-800.0), dtype=np.int64)  # score 0 there
    hi = np.full(100, _key(800.0), dtype=np.int64)  # score 100 there
    while True:
        open_ = hi - 1 > lo
        if not open_.any():
            break
        mid = (lo >> 1) + (hi >> 1) + (lo & hi & 1)  # no overflow at +-2**62
        with np.errstate(over="ignore"):
            x = _double(mid)
            score = np.trunc(1.0 / (1.0 + np.exp(-x)) * 100)
        up = score >= target
        hi = np.where(open_ & up, mid, hi)
        lo = np.where(open_ & ~up, mid, lo)
    return _double(hi)


def _key(x: float) -> int:
    bits = int(np.array(x, dtype=np.float64).view(np.int64))
    return bits if bits >= 0 else -(bits & 0x7FFFFFFFFFFFFFFF)


def _double(keys: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    bits = np.where(keys >= 0, keys, (-keys) | np.int64(-0x8000000000000000))
    return np.asarray(bits, dtype=np.int64).view(np.float64)


# -- FGD -----------------------------------------------------------------------------
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


@njit(cache=True)
def fgd_scores(
    nodes, num_gpu, milli, cpu, exact, gpu_free, cpu_free, node_version, class_ok, c_cpu,
    c_num_gpu, weight, fit_table, below_table, fit_count, below, free, frag, tracked,
    d_fit, d_below, thresholds, out_cand, out_best, out_slot,
):  # fmt: skip  # pragma: no cover
    """``fgd_node`` for each of ``nodes`` (refreshing the stale ones first): candidate
    scores (K, C), best score and its slot per node."""
    buf = np.empty(max(weight.shape[0], 1))
    xs = np.empty(max(out_cand.shape[1], 1))
    for i in range(nodes.shape[0]):
        n = nodes[i]
        if tracked[n] != node_version[n]:
            refresh_node(
                n, gpu_free, cpu_free, node_version, class_ok, c_cpu, c_num_gpu, weight,
                fit_table, below_table, fit_count, below, free, frag, tracked, buf,
            )  # fmt: skip
        out_best[i], out_slot[i] = fgd_node(
            n, num_gpu, milli, cpu, exact, gpu_free, cpu_free, class_ok, c_cpu, c_num_gpu,
            weight, fit_count, below, free, frag, d_fit, d_below, thresholds, buf, out_cand[i], xs,
        )  # fmt: skip


# -- worst fit -----------------------------------------------------------------------
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
def worstfit_scores(
    nodes, num_gpu, milli, cpu, cpu_scale, gpu_free, cpu_free, out, slots
):  # pragma: no cover
    """``worstfit_node`` for each of ``nodes``."""
    for i in range(nodes.shape[0]):
        out[i], slots[i] = worstfit_node(
            nodes[i], num_gpu, milli, cpu, cpu_scale, gpu_free, cpu_free
        )


# -- the per-job step ----------------------------------------------------------------
@njit(cache=True)
def fits(
    n, num_gpu, milli, cpu, memory, model_ok, gpu_free, cpu_free, memory_free
):  # pragma: no cover
    """The filter (``placement.filter.feasible_among``) for one node."""
    if cpu_free[n] < cpu or memory_free[n] < memory:
        return False
    if num_gpu == 0:
        return True
    if not model_ok[n]:
        return False
    fitting = 0
    for g in range(gpu_free.shape[1]):
        if gpu_free[n, g] >= milli:
            fitting += 1
    return fitting >= num_gpu


@njit(cache=True, fastmath=True)
def _max(raw):  # pragma: no cover
    """The largest score. fastmath lets the loop vectorize; max is exact in any order
    (scores are never NaN, and -0.0 never meets 0.0 at the top)."""
    best = -np.inf
    for p in range(raw.shape[0]):
        best = max(best, raw[p])
    return best


@njit(cache=True)
def first_max(raw):  # pragma: no cover
    """``argmax(raw)`` (the first position of the largest value), -1 if all are -inf."""
    best = _max(raw)
    if best == -np.inf:
        return -1
    for p in range(raw.shape[0]):
        if raw[p] == best:
            return p
    return -1


@njit(cache=True)
def sync_node(
    n, kind, exact, num_gpu, milli, cpu, memory, model_ok, gpu_free, cpu_free, memory_free,
    node_version, index_version, raw, slot, rank, cpu_scale, class_ok, c_cpu, c_num_gpu,
    weight, fit_table, below_table, fit_count, below, free, frag, tracked, d_fit, d_below,
    thresholds, buf, cand, xs,
):  # fmt: skip  # pragma: no cover
    """Re-test and re-score node ``n`` for one shape's index (its position ``rank[n]``)."""
    index_version[n] = node_version[n]
    p = rank[n]
    if not fits(n, num_gpu, milli, cpu, memory, model_ok, gpu_free, cpu_free, memory_free):
        raw[p] = -np.inf
        slot[p] = -1
        return
    if kind == 0:  # FGD
        if tracked[n] != node_version[n]:
            refresh_node(
                n, gpu_free, cpu_free, node_version, class_ok, c_cpu, c_num_gpu, weight,
                fit_table, below_table, fit_count, below, free, frag, tracked, buf,
            )  # fmt: skip
        raw[p], slot[p] = fgd_node(
            n, num_gpu, milli, cpu, exact, gpu_free, cpu_free, class_ok, c_cpu, c_num_gpu,
            weight, fit_count, below, free, frag, d_fit, d_below, thresholds, buf, cand, xs,
        )  # fmt: skip
    else:  # worst fit
        raw[p], slot[p] = worstfit_node(n, num_gpu, milli, cpu, cpu_scale, gpu_free, cpu_free)


@njit(cache=True)
def place_run(
    count, apply, kind, exact, num_gpu, milli, cpu, memory, model_ok,
    gpu_free, gpu_tasks, cpu_free, memory_free, kind_count, node_version,
    index_version, raw, slot, rank, perm, cpu_scale,
    class_ok, c_cpu, c_num_gpu, weight, fit_table, below_table,
    fit_count, below, free, frag, tracked, d_fit, d_below, thresholds,
    out_node, out_gpus,
):  # fmt: skip  # pragma: no cover
    """Place up to ``count`` jobs of one shape in turn; how many found a node.

    First the nodes whose version moved since this shape's index (``index_version``,
    ``raw``/``slot`` in tie-break order) last saw them are re-tested and re-scored. Each
    job takes the first best position and writes its node and GPU slots to
    ``out_node``/``out_gpus``. Without ``apply`` that is all (one job decided, the state
    untouched). With ``apply`` the job is allocated on the state's arrays (as
    ``ClusterState.allocate``; the caller records the assignments with
    ``ClusterState.adopt``), only that node is re-scored, and the next job follows: the
    first best is the same position if its score did not fall, else the next position
    holding the same best score, else a new scan. Stops at the first job no node can
    hold (later ones of the same shape cannot fit either).
    """
    num_nodes = node_version.shape[0]
    width = gpu_free.shape[1]
    buf = np.empty(max(weight.shape[0], 1))
    cand = np.empty(max(width, 1))
    xs = np.empty(max(width, 1))
    fractional = num_gpu == 1 and milli < 1000
    for n in range(num_nodes):
        if index_version[n] != node_version[n]:
            sync_node(
                n, kind, exact, num_gpu, milli, cpu, memory, model_ok, gpu_free, cpu_free,
                memory_free, node_version, index_version, raw, slot, rank, cpu_scale,
                class_ok, c_cpu, c_num_gpu, weight, fit_table, below_table, fit_count,
                below, free, frag, tracked, d_fit, d_below, thresholds, buf, cand, xs,
            )  # fmt: skip
    pos = first_max(raw)
    placed = 0
    for j in range(count):
        if pos < 0:
            break
        n = perm[pos]
        out_node[j] = n
        taken = 0
        if fractional:
            out_gpus[j, 0] = slot[pos]
            taken = 1
        elif num_gpu > 0:
            for g in range(width):
                if taken < num_gpu and gpu_free[n, g] >= 1000:
                    out_gpus[j, taken] = g
                    taken += 1
        placed += 1
        if not apply:
            break
        for t in range(taken):
            g = out_gpus[j, t]
            gpu_free[n, g] -= milli
            gpu_tasks[n, g] += 1
        cpu_free[n] -= cpu
        memory_free[n] -= memory
        if num_gpu > 0:
            kind_count[n, 0 if fractional else num_gpu] += 1
        node_version[n] += 1
        # Only node n changed since the scores were current (this call owns the state).
        best = raw[pos]
        sync_node(
            n, kind, exact, num_gpu, milli, cpu, memory, model_ok, gpu_free, cpu_free,
            memory_free, node_version, index_version, raw, slot, rank, cpu_scale,
            class_ok, c_cpu, c_num_gpu, weight, fit_table, below_table, fit_count,
            below, free, frag, tracked, d_fit, d_below, thresholds, buf, cand, xs,
        )  # fmt: skip
        if raw[pos] >= best:
            continue  # every earlier position is below best: pos is still the first max
        later = -1
        for p in range(pos + 1, num_nodes):
            if raw[p] == best:
                later = p
                break
        pos = later if later >= 0 else first_max(raw)
    return placed


# -- the event timeline -------------------------------------------------------------
@njit(cache=True)
def replay_samples(
    gpu_free, cpu_free, num_gpus, part_node, part_milli, part_cpu, part_slot_at, slots,
    log, ends, with_frag, class_ok, c_cpu, c_num_gpu, weight, fit_table, below_table,
    frag_total, changed_sample, changed_node, changed_busy, changed_cpu_free,
):  # fmt: skip  # pragma: no cover
    """The event timeline's replay (``sim/event/timeline.py``), here beside the F it
    re-counts so that numba's cache, kept per file, never pairs it with an older F.

    Apply ``log`` (``+p + 1``: part ``p`` allocated, ``-(p + 1)``: released) to
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


assert MILLI_PER_GPU == 1000  # the kernels spell the whole GPU as 1000
