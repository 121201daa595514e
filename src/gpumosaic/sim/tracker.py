"""Keeps cluster-wide figures (allocation, fragmentation, power) current as nodes change.

Only nodes whose ``state.node_version`` moved since the last read are re-evaluated, so a
timeline point costs O(touched nodes), not O(cluster). Fragmentation comes from the
shared incremental FGD tracker, so a run with FGD placement computes it once. Power per
node is kept in plain floats and the cluster totals are re-summed only when a node moved.
"""

from __future__ import annotations

import numpy as np

from gpumosaic.model.power import NodePower, node_power_w
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.fragmentation import FragmentationTracker, shared_tracker
from gpumosaic.placement.workload import TargetWorkload


class ClusterTracker:
    def __init__(self, state: ClusterState, workload: TargetWorkload | None) -> None:
        self.state = state
        self.workload = workload
        self.node_gpu_w, self.node_cpu_w = node_power_w(state)
        self._node_power = NodePower(state)
        self._version = state.node_version.copy()
        self._power = (float(self.node_gpu_w.sum()), float(self.node_cpu_w.sum()))
        self._frag: FragmentationTracker | None = None

    def _refresh_power(self) -> None:
        stale = np.flatnonzero(self._version != self.state.node_version)
        if len(stale):
            for node in stale.tolist():
                self.node_gpu_w[node], self.node_cpu_w[node] = self._node_power.node_w(node)
            self._version[stale] = self.state.node_version[stale]
            self._power = (float(self.node_gpu_w.sum()), float(self.node_cpu_w.sum()))

    @property
    def allocated_milli(self) -> float:
        return float(self.state.allocated_gpu_milli)

    @property
    def fragmentation_rate(self) -> float:
        """Cluster fragmentation / free milli; NaN without a target workload."""
        if self.workload is None:
            return float("nan")
        tracker = self._frag
        if tracker is None:
            tracker = self._frag = shared_tracker(self.state, self.workload)
        else:
            tracker.refresh()
        return tracker.rate()

    @property
    def power_w(self) -> tuple[float, float]:
        self._refresh_power()
        return self._power
