"""Keeps cluster-wide figures (allocation, fragmentation, power) current as nodes change.

Only nodes whose ``state.node_version`` moved since the last read are re-evaluated, so a
timeline point costs O(touched nodes), not O(cluster). Fragmentation comes from the
shared incremental FGD tracker, so a run with FGD placement computes it once.
"""

from __future__ import annotations

from gpumosaic.model.power import PowerTracker
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.fragmentation import shared_tracker
from gpumosaic.placement.workload import TargetWorkload


class ClusterTracker:
    def __init__(self, state: ClusterState, workload: TargetWorkload | None) -> None:
        self.state = state
        self.workload = workload
        self.power = PowerTracker(state)

    @property
    def allocated_milli(self) -> float:
        return float(self.state.allocated_gpu_milli)

    @property
    def fragmentation_rate(self) -> float:
        """Cluster fragmentation / free milli; NaN without a target workload."""
        if self.workload is None:
            return float("nan")
        return shared_tracker(self.state, self.workload).rate()

    @property
    def power_w(self) -> tuple[float, float]:
        return self.power.power_w
