"""FGD's fragmentation measure (DESIGN.md), vectorized over nodes and task classes."""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.workload import TargetWorkload


def node_fragmentation(
    state: ClusterState,
    workload: TargetWorkload,
    gpu_free: npt.NDArray[np.int32] | None = None,
    cpu_free: npt.NDArray[np.int64] | None = None,
    nodes: npt.NDArray[np.intp] | None = None,
) -> npt.NDArray[np.float64]:
    """F_n = sum_m p_m F_n(m) in milli-GPU, for every node (or the given ``nodes``).

    ``gpu_free`` / ``cpu_free`` default to the state's own (rows for ``nodes``); passing
    hypothetical rows lets a scorer evaluate a node "after" a placement without mutating.
    """
    idx = np.arange(state.num_nodes) if nodes is None else nodes
    g = state.gpu_free[idx] if gpu_free is None else gpu_free
    c = state.cpu_free[idx] if cpu_free is None else cpu_free
    free_total = g.sum(axis=1).astype(np.float64)
    out = np.zeros(len(idx), dtype=np.float64)
    for task_class, p in zip(workload.classes, workload.popularity, strict=True):
        if task_class.num_gpu == 0:
            out += p * free_total
            continue
        fits = g >= task_class.gpu_milli
        can_fit = (fits.sum(axis=1) >= task_class.num_gpu) & (c >= task_class.cpu_milli)
        can_fit &= state.model_mask(task_class.allowed_models)[idx]
        stranded = np.where(fits, 0, g).sum(axis=1)
        out += p * np.where(can_fit, stranded, free_total)
    return out


def cluster_fragmentation(state: ClusterState, workload: TargetWorkload) -> float:
    """Sum of node fragmentation, milli-GPU."""
    return float(node_fragmentation(state, workload).sum())


def fragmentation_rate(state: ClusterState, workload: TargetWorkload) -> float:
    """Cluster fragmentation / total free GPU milli (0 when nothing is free)."""
    free = float(state.gpu_free.sum())
    return cluster_fragmentation(state, workload) / free if free > 0 else 0.0


@dataclass(frozen=True, slots=True)
class ClassArrays:
    """The target workload as arrays, aligned with one cluster's nodes.

    ``milli`` is the per-GPU request (0 for CPU-only classes); ``model_ok[n, m]`` says
    whether node n's GPU model is allowed by class m; ``class_ok`` is ``model_ok`` of the
    GPU classes only (a CPU-only class is never "fitting": it counts all free milli).
    ``fit_table[v, m]`` = 1 if a GPU with ``v`` free milli fits class m, and
    ``below_table[v, m]`` = ``v`` if it does not (the milli it strands), 0 otherwise: a
    GPU's contribution to the per-class counts is one row lookup, never a comparison.
    """

    milli: npt.NDArray[np.int64]
    num_gpu: npt.NDArray[np.int64]
    cpu: npt.NDArray[np.int64]
    weight: npt.NDArray[np.float64]
    gpu_class: npt.NDArray[np.bool_]
    model_ok: npt.NDArray[np.bool_]
    class_ok: npt.NDArray[np.bool_]
    fit_table: npt.NDArray[np.int64]
    below_table: npt.NDArray[np.int64]
    count_table: npt.NDArray[np.int64]  # [fit_table | below_table]: one lookup for both

    @classmethod
    def build(cls, state: ClusterState, workload: TargetWorkload) -> ClassArrays:
        classes = workload.classes
        model_ok = np.stack([state.model_mask(c.allowed_models) for c in classes], axis=1)
        num_gpu = np.array([c.num_gpu for c in classes], dtype=np.int64)
        milli = np.array([c.gpu_milli if c.num_gpu else 0 for c in classes], dtype=np.int64)
        free = np.arange(MILLI_PER_GPU + 1, dtype=np.int64)[:, None]
        fits = free >= milli
        return cls(
            milli=milli,
            num_gpu=num_gpu,
            cpu=np.array([c.cpu_milli for c in classes], dtype=np.int64),
            weight=np.asarray(workload.popularity, dtype=np.float64),
            gpu_class=num_gpu > 0,
            model_ok=model_ok,
            class_ok=model_ok & (num_gpu > 0),
            fit_table=fits.astype(np.int64),
            below_table=np.where(fits, 0, free),
            count_table=np.concatenate([fits.astype(np.int64), np.where(fits, 0, free)], axis=1),
        )


def gpu_change_deltas(
    classes: ClassArrays, before: npt.NDArray[np.int64], after: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """How one GPU going from ``before`` to ``after`` free milli changes, per class, the
    count of GPUs that fit the class and the free milli stranded below it.

    Shapes: ``before``/``after`` (...,) in 0..1000, results (..., M).
    """
    fit, below = classes.fit_table, classes.below_table
    return fit[after] - fit[before], below[after] - below[before]


class FragmentationTracker:
    """FGD's per-node fragmentation F_n, kept current incrementally.

    For every node and class m it keeps ``fit_count`` (GPUs with free >= the class's milli)
    and ``below`` (free milli on the GPUs below it). Only nodes whose
    ``state.node_version`` moved since the last ``refresh`` are recomputed, so a replay
    that touches one node per task pays for one node per task. ``frag_after`` evaluates
    hypothetical changes from these counts without copying any node.
    """

    def __init__(self, state: ClusterState, workload: TargetWorkload) -> None:
        self.state = state
        self.workload = workload
        self.classes = ClassArrays.build(state, workload)
        n, m = state.num_nodes, len(workload.classes)
        self.fit_count = np.zeros((n, m), dtype=np.int64)
        self.below = np.zeros((n, m), dtype=np.int64)
        self.free = np.zeros(n, dtype=np.int64)
        self.frag = np.zeros(n, dtype=np.float64)
        self._version = np.full(n, -1, dtype=np.int64)
        self._gpu_deltas: dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = {}
        self.refresh()

    def refresh(self) -> None:
        """Recompute the nodes that changed since the last call."""
        state = self.state
        stale = np.flatnonzero(self._version != state.node_version)
        if not len(stale):
            return
        if len(stale) == 1:  # the common case (one node per task): 1-D, half the calls
            self._refresh_node(int(stale[0]))
            return
        g = state.gpu_free[stale]
        fit = self.classes.fit_table[g].sum(axis=1)
        below = self.classes.below_table[g].sum(axis=1)
        free = g.sum(axis=1, dtype=np.int64)
        self.fit_count[stale] = fit
        self.below[stale] = below
        self.free[stale] = free
        ok = self.node_ok(stale, state.cpu_free[stale])
        self.frag[stale] = self.frag_of(ok, fit[:, None, :], below[:, None, :], free[:, None])[:, 0]
        self._version[stale] = state.node_version[stale]

    def _refresh_node(self, node: int) -> None:
        """``refresh`` of one node, in 1-D arrays. Same values bit for bit: the F sum is
        the same contiguous M-element reduction as a row of ``frag_of``."""
        state, c = self.state, self.classes
        g = state.gpu_free[node]
        counts = c.count_table[g].sum(axis=0)
        m = len(c.milli)
        fit, below = counts[:m], counts[m:]
        free = int(g.sum())
        self.fit_count[node] = fit
        self.below[node] = below
        self.free[node] = free
        ok = c.class_ok[node] & (state.cpu_free[node] >= c.cpu) & (fit >= c.num_gpu)
        self.frag[node] = (np.where(ok, below, free) * c.weight).sum()
        self._version[node] = state.node_version[node]

    def node_ok(
        self, nodes: npt.NDArray[np.intp], cpu_free: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.bool_]:
        """(K, M): class m could use node n at all (a GPU class, its model allowed, enough
        CPU left); whether enough GPUs fit is the other half of the test."""
        c = self.classes
        return c.class_ok[nodes] & (cpu_free[:, None] >= c.cpu)

    def frag_of(
        self,
        node_ok: npt.NDArray[np.bool_],
        fit: npt.NDArray[np.int64],
        below: npt.NDArray[np.int64],
        free: npt.NDArray[np.int64],
    ) -> npt.NDArray[np.float64]:
        """F for K nodes under C candidate states each: ``node_ok`` (K, M) from
        ``node_ok``, counts ``fit``/``below`` (K, C, M), free milli (K, C). (K, C) milli.

        Every F of the package goes through this one expression, so a node in the same
        state always gets bit-identical F and FGD sees a Delta of exactly 0.
        """
        c = self.classes
        ok = node_ok[:, None, :] & (fit >= c.num_gpu)
        return (np.where(ok, below, free[:, :, None]) * c.weight).sum(axis=-1)

    def frag_after(
        self,
        nodes: npt.NDArray[np.intp],
        d_fit: npt.NDArray[np.int64],
        d_below: npt.NDArray[np.int64],
        d_free: npt.NDArray[np.int64],
        cpu_after: npt.NDArray[np.int64],
    ) -> npt.NDArray[np.float64]:
        """F_n for ``nodes`` (K) under C candidate changes each: deltas (K, C, M) for the
        counts, (K, C) for free milli; CPU left (K,). Returns (K, C) milli-GPU."""
        return self.frag_of(
            self.node_ok(nodes, cpu_after),
            self.fit_count[nodes][:, None, :] + d_fit,
            self.below[nodes][:, None, :] + d_below,
            self.free[nodes][:, None] + d_free,
        )

    def gpu_deltas(self, milli: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(V, M) tables for a fractional task of ``milli``: row ``f`` is how the per-class
        counts change when a GPU with ``f`` free milli takes it (rows f < milli, where it
        does not fit, are placeholders). Built once per distinct milli."""
        table = self._gpu_deltas.get(milli)
        if table is None:
            free = np.arange(MILLI_PER_GPU + 1)
            table = gpu_change_deltas(self.classes, free, np.maximum(free - milli, 0))
            self._gpu_deltas[milli] = table
        return table

    def total(self) -> float:
        """Cluster fragmentation in milli-GPU (call ``refresh`` first)."""
        return float(self.frag.sum())

    def rate(self) -> float:
        """Cluster fragmentation / total free milli, 0 when nothing is free."""
        free = int(self.free.sum())
        return self.total() / free if free > 0 else 0.0


_SHARED: weakref.WeakKeyDictionary[ClusterState, dict[int, FragmentationTracker]] = (
    weakref.WeakKeyDictionary()
)


def shared_tracker(state: ClusterState, workload: TargetWorkload) -> FragmentationTracker:
    """The one tracker of ``state`` for ``workload`` (by identity), refreshed.

    The FGD scorer and the fill replay that records fragmentation both ask for it, so the
    touched node is recomputed once per task, not once per user.
    """
    trackers = _SHARED.setdefault(state, {})
    tracker = trackers.get(id(workload))
    if tracker is None or tracker.workload is not workload:
        tracker = FragmentationTracker(state, workload)
        trackers[id(workload)] = tracker
    tracker.refresh()
    return tracker
