"""Cluster-wide figures for the round timeline, refreshed once per round for the nodes
whose allocation changed (``ClusterState.node_version`` moved): a round moves several
jobs, and one vectorized pass over the touched nodes is much cheaper than one per change."""

from __future__ import annotations

import numpy as np

from gpumosaic.model.power import SOCKET_FULL_W, SOCKET_IDLE_W, gpu_power_table, sockets
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.fragmentation import node_fragmentation
from gpumosaic.placement.workload import TargetWorkload


class RoundTracker:
    def __init__(self, state: ClusterState, workload: TargetWorkload | None) -> None:
        self.state = state
        self.workload = workload
        self._version = state.node_version.copy()
        self.node_fragmentation = (
            node_fragmentation(state, workload) if workload is not None else None
        )
        # The power model of model/power.py, with the per-node constants computed once.
        self._idle_w, self._full_w = gpu_power_table(state)
        self._gpus = state.gpu_exists.sum(axis=1)
        self._sockets = sockets(state.cpu_capacity)
        self.node_gpu_w = np.zeros(state.num_nodes)
        self.node_cpu_w = np.zeros(state.num_nodes)
        self._power(np.arange(state.num_nodes))
        self.node_free_milli = state.gpu_free.sum(axis=1).astype(np.float64)

    def refresh(self) -> None:
        """Re-evaluate every node changed since the last refresh."""
        state = self.state
        idx = np.flatnonzero(self._version != state.node_version)
        if len(idx) == 0:
            return
        self._version[idx] = state.node_version[idx]
        if self.node_fragmentation is not None and self.workload is not None:
            self.node_fragmentation[idx] = node_fragmentation(state, self.workload, nodes=idx)
        self._power(idx)
        self.node_free_milli[idx] = state.gpu_free[idx].sum(axis=1)

    def _power(self, idx: np.ndarray) -> None:
        """A GPU with any allocation draws full power; CPU sockets active by busy cores."""
        state = self.state
        busy = (state.gpu_exists[idx] & (state.gpu_free[idx] < state.gpu_capacity[idx])).sum(axis=1)
        self.node_gpu_w[idx] = (
            busy * self._full_w[idx] + (self._gpus[idx] - busy) * self._idle_w[idx]
        )
        total = self._sockets[idx]
        active = np.minimum(sockets(state.cpu_capacity[idx] - state.cpu_free[idx]), total)
        self.node_cpu_w[idx] = active * SOCKET_FULL_W + (total - active) * SOCKET_IDLE_W

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
