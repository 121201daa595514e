"""The per-job step of a placement, compiled: filter, (re-)score the touched nodes, pick
the first best node in tie-break order, pick the GPUs, and -- for a run of same-shape
jobs -- allocate and go on (``place_run``). Random's filter and picks are ``random.py``.

Arguments after the counts are the tuples ``scores.py`` describes, plus:

- ``model_ok``: the nodes whose GPU model the job allows;
- ``members``: (kinds (M,), weights (M,), all_equal (M,): min-max normalization's value
  when the range is 0, NaN for no normalization; chooser: the member whose GPU choice a
  fractional job takes; cpu_scale: worst fit's packing factor);
- ``idx``: one job shape's index, kept by the strategy between calls, over the shape's
  candidate nodes only (P of them: the nodes whose GPU model it allows, in tie-break
  order; a node of another model never passes its filter): (index_version (P,): the
  node version each position was last scored at, raw (M, P): each member's raw score by
  position, -inf where the node fails the filter, slot (P,): the chooser's GPU there,
  rank (N,): node -> position (-1: not a candidate), perm (P,): position -> node, three
  scratch arrays (P,): cols, tmp, total, the untouched nodes' shared verdicts
  (``sync_positions``): pristine (N,), class_raw (M, C), class_slot (C,), class_known (C,),
  and tree (2T,), T the least power of two >= P: a max tournament over raw[0] by
  position (leaf p at T + p), kept for one plain member, whose decision is its first
  maximum (``tree_first_max``): O(log P) per re-scored node instead of a scan of P).
"""

from __future__ import annotations

import numpy as np

from gpumosaic.kernel_cache import njit
from gpumosaic.placement.kernel.fgd import fgd_node, refresh_node
from gpumosaic.placement.kernel.scores import (
    FGD,
    FGD_EXACT,
    WORSTFIT,
    minmax_value,
    score_many,
    weighted_total,
    worstfit_node,
)
from gpumosaic.placement.kernel.tournament import tree_build, tree_first_max, tree_set


@njit(cache=True)
def fits(
    n, num_gpu, milli, cpu, memory, model_ok, gpu_free, cpu_free, memory_free
):  # pragma: no cover
    """The filter for one node: enough free CPU and memory, and for a GPU job an allowed
    model and ``num_gpu`` GPUs with ``milli`` free each."""
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


@njit(cache=True)
def fits_among(nodes, job, model_ok, gpu_free, cpu_free, memory_free, out):  # pragma: no cover
    """``fits`` for each of ``nodes`` into ``out`` (``placement.filter.feasible_among``)."""
    num_gpu, milli, cpu, memory = job
    for i in range(nodes.shape[0]):
        out[i] = fits(
            nodes[i], num_gpu, milli, cpu, memory, model_ok, gpu_free, cpu_free, memory_free
        )


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
def _plain(all_equal):  # pragma: no cover
    """One member without normalization: its raw score decides alone."""
    return all_equal.shape[0] == 1 and np.isnan(all_equal[0])


@njit(cache=True)
def decide(raw, weights, all_equal, cols, tmp, total):  # pragma: no cover
    """Position of the first best feasible node, -1 if none: for one plain member the
    first maximum of its raw scores; else the weighted sum of the members' normalized
    scores over the feasible positions (``scores.weighted_total``) and its first maximum."""
    if _plain(all_equal):
        return first_max(raw[0])
    if raw.shape[0] == 1:
        return _decide_normalized(raw[0], weights[0], all_equal[0])
    k = 0
    for p in range(raw.shape[1]):
        if raw[0, p] > -np.inf:
            cols[k] = p
            k += 1
    if k == 0:
        return -1
    weighted_total(raw, cols, k, weights, all_equal, tmp, total)
    best = 0
    for i in range(1, k):
        if total[i] > total[best]:
            best = i
    return cols[best]


@njit(cache=True)
def _decide_normalized(raw, weight, all_equal):  # pragma: no cover
    """``decide`` for one min-max normalized member in two passes, the same arithmetic
    as ``weighted_total`` + first maximum: ``0.0 + weight * floor((s - lo) * 100 / span)``
    is ``weight * floor(...)`` exactly, the floor being >= 0."""
    lo = np.inf
    hi = -np.inf
    for p in range(raw.shape[0]):
        s = raw[p]
        if s > -np.inf:
            lo = min(lo, s)
            hi = max(hi, s)
    if hi == -np.inf:
        return -1
    best = -1
    top = -np.inf
    span = hi - lo
    for p in range(raw.shape[0]):
        s = raw[p]
        if s == -np.inf:
            continue
        if hi == lo:
            return p  # every feasible node totals weight * all_equal: the first one wins
        v = weight * minmax_value(s, lo, span)
        if v > top:
            top = v
            best = p
    return best


@njit(cache=True)
def sync_positions(
    k, todo, job, model_ok, cl, members, fg, pw, idx, buf, cand, xs, work
):  # pragma: no cover
    """Re-test and re-score the nodes at positions ``todo[:k]`` of one shape's index.

    A node untouched since the strategy was bound (version 0; ``pristine[n]``: its
    capacity class, -1 where scores may read the node's index) is in the same state as
    every untouched node of its class, so its verdict and scores are those of the first
    such node this shape scored (``class_raw``, ``class_slot``, ``class_known``). The
    nodes that pass the filter are scored member by member (``scores.score_many``), one
    untouched node per class (the others of its class copy its scores); ``work`` (3, P)
    is scratch for their nodes and positions and the copies."""
    num_gpu, milli, cpu, memory = job
    gpu_free, _, cpu_free, memory_free, _, node_version, _, _, _ = cl
    kinds, _, _, chooser, cpu_scale = members
    index_version, raw, slot, _, perm, _, _, _, pristine, class_raw, class_slot, known, _ = idx
    nodes = work[0]
    positions = work[1]
    copies = work[2]
    pending = np.full(known.shape[0], -1, dtype=np.int64)  # class -> scored in this batch
    scored = 0
    copied = 0
    for i in range(k):
        p = todo[i]
        n = perm[p]
        index_version[p] = node_version[n]
        c = pristine[n] if node_version[n] == 0 else -1
        if c >= 0 and known[c]:
            for m in range(raw.shape[0]):
                raw[m, p] = class_raw[m, c]
            slot[p] = class_slot[c]
        elif c >= 0 and pending[c] >= 0:
            copies[copied] = p
            copied += 1
        elif fits(n, num_gpu, milli, cpu, memory, model_ok, gpu_free, cpu_free, memory_free):
            nodes[scored] = n
            positions[scored] = p
            scored += 1
            if c >= 0:
                pending[c] = p
        else:
            for m in range(raw.shape[0]):
                raw[m, p] = -np.inf
            slot[p] = -1
            if c >= 0:
                for m in range(raw.shape[0]):
                    class_raw[m, c] = -np.inf
                class_slot[c] = -1
                known[c] = True
    if scored == 0:
        return
    for m in range(kinds.shape[0]):
        score_many(
            kinds[m], m, chooser, nodes, positions, scored, job, cl, fg, pw, cpu_scale, buf,
            cand, xs, raw, slot,
        )  # fmt: skip
    for i in range(scored):
        n = nodes[i]
        c = pristine[n] if node_version[n] == 0 else -1
        if c >= 0:
            p = positions[i]
            for m in range(raw.shape[0]):
                class_raw[m, c] = raw[m, p]
            class_slot[c] = slot[p]
            known[c] = True
    for i in range(copied):
        p = copies[i]
        c = pristine[perm[p]]
        for m in range(raw.shape[0]):
            raw[m, p] = class_raw[m, c]
        slot[p] = class_slot[c]


@njit(cache=True)
def take_gpus(n, j, job, gpu_free, fractional_slot, out_gpus):  # pragma: no cover
    """Write the GPU slots a job takes on node ``n`` into ``out_gpus[j]``; how many: none
    for a CPU-only job, ``fractional_slot`` for a fractional one, else the lowest-index
    fully free GPUs (``gpu_choice.exclusive_gpus``)."""
    num_gpu, milli, _, _ = job
    if num_gpu == 0:
        return 0
    if num_gpu == 1 and milli < 1000:
        out_gpus[j, 0] = fractional_slot
        return 1
    taken = 0
    for g in range(gpu_free.shape[1]):
        if taken < num_gpu and gpu_free[n, g] >= 1000:
            out_gpus[j, taken] = g
            taken += 1
    return taken


@njit(cache=True)
def allocate(n, j, taken, job, cl, out_gpus):  # pragma: no cover
    """``ClusterState.allocate`` on the arrays (the caller records the assignments with
    ``ClusterState.adopt``)."""
    num_gpu, milli, cpu, memory = job
    gpu_free, gpu_tasks, cpu_free, memory_free, kind_count, node_version, _, _, _ = cl
    for t in range(taken):
        g = out_gpus[j, t]
        gpu_free[n, g] -= milli
        gpu_tasks[n, g] += 1
    cpu_free[n] -= cpu
    memory_free[n] -= memory
    if num_gpu > 0:
        kind_count[n, 0 if num_gpu == 1 and milli < 1000 else num_gpu] += 1
    node_version[n] += 1


@njit(cache=True)
def place_run(
    count, apply, job, model_ok, cl, members, fg, pw, idx, out_node, out_gpus
):  # pragma: no cover
    """Place up to ``count`` jobs of one shape in turn; how many found a node.

    First the candidate nodes whose version moved since this shape's index last saw them
    are re-tested and re-scored. Each job takes the first best position and writes its
    node and GPU slots to ``out_node``/``out_gpus``. Without ``apply`` that is all (one
    job decided, the state untouched). With ``apply`` the job is allocated on the state's
    arrays, only that node is re-scored, and the next job follows: for one plain member
    the first best is the tournament's (``tree_first_max``); with normalization or several
    members the decision is made again (min-max reads every feasible node). Stops at the
    first job no node can hold (later ones of the same shape cannot fit either).
    """
    node_version = cl[5]
    gpu_free = cl[0]
    _, weights, all_equal, _, _ = members
    index_version, raw, slot, _, perm, cols, tmp, total, _, _, _, _, tree = idx
    positions = perm.shape[0]
    width = gpu_free.shape[1]
    buf = np.empty(max(fg[3].shape[0], 1))
    cand = np.empty(max(width, 1))
    xs = np.empty(max(width, 1))
    work = np.empty((3, max(positions, 1)), dtype=np.int64)
    synced = 0
    for p in range(positions):
        if index_version[p] != node_version[perm[p]]:
            cols[synced] = p
            synced += 1
    sync_positions(synced, cols, job, model_ok, cl, members, fg, pw, idx, buf, cand, xs, work)
    one = np.empty(1, dtype=np.int64)
    one_pos = np.empty(1, dtype=np.int64)
    num_gpu, milli, cpu, memory = job
    cpu_free, memory_free = cl[2], cl[3]
    kinds, _, _, chooser, cpu_scale = members
    (class_ok, c_cpu, c_num_gpu, weight, fit_table, below_table, fit_count, below, free, frag,
     tracked, d_fit, d_below, thresholds) = fg  # fmt: skip
    plain = _plain(all_equal)
    if plain:
        # A full rebuild costs ~2T; a point update up to log2(T) steps.
        if synced * 16 > tree.shape[0]:
            tree_build(raw[0], tree)
        else:
            for i in range(synced):
                tree_set(tree, cols[i], raw[0, cols[i]])
        pos = tree_first_max(tree)
    else:
        pos = decide(raw, weights, all_equal, cols, tmp, total)
    placed = 0
    for j in range(count):
        if pos < 0:
            break
        n = perm[pos]
        out_node[j] = n
        taken = take_gpus(n, j, job, gpu_free, slot[pos], out_gpus)
        placed += 1
        if not apply:
            break
        allocate(n, j, taken, job, cl, out_gpus)
        # Only node n changed since the scores were current (this call owns the state);
        # it is no longer untouched, so no class verdict applies.
        index_version[pos] = node_version[n]
        if fits(n, num_gpu, milli, cpu, memory, model_ok, gpu_free, cpu_free, memory_free):
            one[0] = n
            one_pos[0] = pos
            for m in range(kinds.shape[0]):
                kind = kinds[m]
                # Worst fit and FGD scored here directly (the same node functions as
                # ``score_many``): a call passing the tuples of arrays costs ~150 ns a
                # job, more than the score.
                if kind == WORSTFIT:
                    score, s = worstfit_node(n, num_gpu, milli, cpu, cpu_scale, gpu_free, cpu_free)
                elif kind in (FGD, FGD_EXACT):
                    if tracked[n] != node_version[n]:
                        refresh_node(
                            n, gpu_free, cpu_free, node_version, class_ok, c_cpu, c_num_gpu,
                            weight, fit_table, below_table, fit_count, below, free, frag,
                            tracked, buf,
                        )  # fmt: skip
                    score, s = fgd_node(
                        n, num_gpu, milli, cpu, kind == FGD_EXACT, gpu_free, cpu_free,
                        class_ok, c_cpu, c_num_gpu, weight, fit_count, below, free, frag,
                        d_fit, d_below, thresholds, buf, cand, xs,
                    )  # fmt: skip
                else:
                    score_many(
                        kind, m, chooser, one, one_pos, 1, job, cl, fg, pw, cpu_scale, buf,
                        cand, xs, raw, slot,
                    )  # fmt: skip
                    continue
                raw[m, pos] = score
                if m == chooser:
                    slot[pos] = s
        else:
            for m in range(raw.shape[0]):
                raw[m, pos] = -np.inf
            slot[pos] = -1
        if plain:
            tree_set(tree, pos, raw[0, pos])
            pos = tree_first_max(tree)
        else:
            pos = decide(raw, weights, all_equal, cols, tmp, total)
    return placed
