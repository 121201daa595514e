"""Keeps cluster-wide figures (allocation, fragmentation, power) current as nodes change.

Only the touched node is re-evaluated after an allocation or release, so recording a
timeline point costs O(one node), not O(cluster). Sums are kept as per-node arrays and
summed on read (no drifting running totals).
"""

from __future__ import annotations

import numpy as np

from gpumosaic.model.power import node_power_w
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.fragmentation import node_fragmentation
from gpumosaic.placement.workload import TargetWorkload


class ClusterTracker:
    def __init__(self, state: ClusterState, workload: TargetWorkload | None) -> None:
        self.state = state
        self.workload = workload
        self.node_fragmentation = (
            node_fragmentation(state, workload) if workload is not None else None
        )
        self.node_gpu_w, self.node_cpu_w = node_power_w(state)
        self.node_free_milli = state.gpu_free.sum(axis=1).astype(np.float64)

    def touched(self, node: int) -> None:
        """Re-evaluate one node after its allocation changed."""
        state = self.state
        idx = np.array([node])
        if self.node_fragmentation is not None and self.workload is not None:
            self.node_fragmentation[node] = node_fragmentation(state, self.workload, nodes=idx)[0]
        gpu_w, cpu_w = node_power_w(state, nodes=idx)
        self.node_gpu_w[node] = gpu_w[0]
        self.node_cpu_w[node] = cpu_w[0]
        self.node_free_milli[node] = state.gpu_free[node].sum()

    @property
    def allocated_milli(self) -> float:
        return self.state.total_gpu_milli - float(self.node_free_milli.sum())

    @property
    def fragmentation_rate(self) -> float:
        """Cluster fragmentation / free milli; NaN without a target workload."""
        if self.node_fragmentation is None:
            return float("nan")
        free = float(self.node_free_milli.sum())
        return float(self.node_fragmentation.sum()) / free if free > 0 else 0.0

    @property
    def power_w(self) -> tuple[float, float]:
        return float(self.node_gpu_w.sum()), float(self.node_cpu_w.sum())
