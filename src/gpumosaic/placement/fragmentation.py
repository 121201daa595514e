"""FGD's fragmentation measure (DESIGN.md), vectorized over nodes and task classes."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

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
