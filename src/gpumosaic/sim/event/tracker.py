"""Keeps cluster-wide figures (fragmentation, power) current as nodes change.

The event driver knows which nodes it touched (the nodes of the jobs it started and
released), so a timeline point re-evaluates the power of those nodes only and keeps the
cluster totals by difference. Fragmentation comes from the shared incremental FGD tracker
(only nodes whose ``state.node_version`` moved are recomputed), so a run with FGD
placement computes it once for both.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpumosaic.model.power import PowerTracker
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.fragmentation import FragmentationTracker, shared_tracker
from gpumosaic.placement.workload import TargetWorkload

# (fragmentation rate, GPU watts, CPU watts) of the whole cluster.
Figures = tuple[float, float, float]


class ClusterTracker:
    def __init__(self, state: ClusterState, workload: TargetWorkload | None) -> None:
        self.state = state
        self.workload = workload
        self.power = PowerTracker(state)
        self._capacity = state.total_gpu_milli
        self._fragmentation: FragmentationTracker | None = (
            None if workload is None else shared_tracker(state, workload)
        )

    def touch(self, nodes: Iterable[int]) -> None:
        """Nodes whose allocation may have changed (repeats are fine)."""
        touch = self.power.touch
        for node in nodes:
            touch(node)

    @property
    def allocated_milli(self) -> float:
        return float(self.state.allocated_gpu_milli)

    @property
    def fragmentation_rate(self) -> float:
        """Cluster fragmentation / free milli; NaN without a target workload."""
        tracker = self._fragmentation
        if tracker is None:
            return float("nan")
        tracker.refresh()
        return tracker.rate()

    @property
    def power_w(self) -> tuple[float, float]:
        """(GPU watts, CPU watts), current for every node changed since the last read."""
        return self.power.power_w

    def figures(self) -> Figures:
        """Fragmentation rate and power, assuming every changed node was ``touch``ed.
        The free milli under the rate is the state's own counter (the tracker's per-node
        free milli sum to it exactly), so one reduction less than ``rate()``."""
        gpu_w, cpu_w = self.power.totals
        tracker = self._fragmentation
        if tracker is None:
            return float("nan"), gpu_w, cpu_w
        tracker.refresh()
        free = self._capacity - self.state.allocated_gpu_milli
        return (tracker.total() / free if free > 0 else 0.0), gpu_w, cpu_w
