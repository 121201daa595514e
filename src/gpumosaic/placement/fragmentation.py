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
    ``state.node_version`` moved since they were last counted are recomputed, so a replay
    that touches one node per task pays for one node per task. The counting and F are
    compiled (``placement.kernel``: ``refresh_stale``), the same functions the FGD scorer
    uses, so a node in the same state always gets bit-identical F.
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
        # The node version each node's counts are for (-1: never counted).
        self.tracked = np.full(n, -1, dtype=np.int64)
        self._gpu_deltas: dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = {}
        c = self.classes
        # One whole GPU taken: the count change, as a one-row table (see ``gpu_deltas``).
        self.whole_gpu_deltas = (
            (c.fit_table[0] - c.fit_table[MILLI_PER_GPU])[None, :].copy(),
            (c.below_table[0] - c.below_table[MILLI_PER_GPU])[None, :].copy(),
        )
        self._count_all()

    def _count_all(self) -> None:
        """Count every node at once with numpy (a new tracker: no numba needed until a
        node changes). Bit for bit what ``refresh`` computes node by node."""
        state, c = self.state, self.classes
        nodes = np.arange(state.num_nodes)
        g = state.gpu_free
        self.fit_count[:] = c.fit_table[g].sum(axis=1)
        self.below[:] = c.below_table[g].sum(axis=1)
        self.free[:] = g.sum(axis=1, dtype=np.int64)
        ok = self.node_ok(nodes, state.cpu_free)
        self.frag[:] = self.frag_of(
            ok, self.fit_count[:, None, :], self.below[:, None, :], self.free[:, None]
        )[:, 0]
        self.tracked[:] = state.node_version

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
        """F for K nodes under C states each, in bulk: ``node_ok`` (K, M) from ``node_ok``,
        counts ``fit``/``below`` (K, C, M), free milli (K, C). (K, C) milli.

        The kernel's F of one node (``kernel.refresh_node``, ``fgd_node``) sums the same
        per-class terms in numpy's pairwise order, so both give bit-identical F for a node
        in the same state (tested): FGD's Delta = 0 stays exact.
        """
        c = self.classes
        ok = node_ok[:, None, :] & (fit >= c.num_gpu)
        f: npt.NDArray[np.float64] = (np.where(ok, below, free[:, :, None]) * c.weight).sum(axis=-1)
        return f

    def refresh(self) -> None:
        """Recompute the nodes that changed since they were last counted."""
        state, c = self.state, self.classes
        if not (self.tracked != state.node_version).any():
            return  # nothing moved (and numba stays unloaded where nothing ever does)
        from gpumosaic.placement import kernel

        kernel.refresh_stale(
            state.gpu_free, state.cpu_free, state.node_version, c.class_ok, c.cpu,
            c.num_gpu, c.weight, c.fit_table, c.below_table, self.fit_count, self.below,
            self.free, self.frag, self.tracked,
        )  # fmt: skip

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

    def job_deltas(
        self, job_num_gpu: int, job_milli: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The count-change tables the FGD kernel reads for a job of this shape."""
        if job_num_gpu == 1 and job_milli < MILLI_PER_GPU:
            return self.gpu_deltas(job_milli)
        return self.whole_gpu_deltas

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
