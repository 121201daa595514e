"""Cluster-wide figures for the round timeline, refreshed once per round for the nodes
whose allocation changed (``ClusterState.node_version`` moved): one compiled pass a round
(``tracker_kernel.refresh_nodes``) re-evaluates the touched nodes' fragmentation, free
milli and watts and keeps the cluster's totals."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from types import ModuleType
from typing import Any

import numpy as np

from gpumosaic.kernel_cache import resolve
from gpumosaic.model.power import PowerTracker
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.fragmentation import ClassArrays, node_fragmentation
from gpumosaic.placement.workload import TargetWorkload


@cache
def _kernel() -> ModuleType:
    """The compiled refresh, imported on first use (numba's import is not free)."""
    from gpumosaic.mechanisms.rounds.sim import tracker_kernel

    return tracker_kernel


class RoundTracker:
    def __init__(self, state: ClusterState, workload: TargetWorkload | None) -> None:
        self.state = state
        self.workload = workload
        self._total_milli = state.total_gpu_milli  # capacities never change
        self._version = state.node_version.copy()
        self.node_fragmentation = (
            node_fragmentation(state, workload) if workload is not None else None
        )
        power = PowerTracker(state)
        self.node_gpu_w = power.node_gpu_w.copy()
        self.node_cpu_w = power.node_cpu_w.copy()
        self.node_free_milli = state.gpu_free.sum(axis=1).astype(np.float64)
        n = state.num_nodes
        if workload is None:
            self._frag = np.zeros(n)
            self._classes: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] = (
                np.zeros(0, dtype=np.int64),
                np.zeros(0, dtype=np.int64),
                np.zeros(0, dtype=np.int64),
                np.zeros(0),
                np.zeros((n, 0), dtype=bool),
            )
        else:
            assert self.node_fragmentation is not None
            self._frag = self.node_fragmentation
            c = ClassArrays.build(state, workload)
            self._classes = (c.num_gpu, c.milli, c.cpu, c.weight, c.model_ok)
        gpu_w, cpu_w = power.totals
        # free milli, fragmentation, GPU watts, CPU watts of the whole cluster
        self._totals = np.array(
            [float(self.node_free_milli.sum()), float(self._frag.sum()), gpu_w, cpu_w]
        )
        self._refresh: Callable[..., Any] | None = None  # ``refresh_nodes``, resolved
        # ``refresh_nodes``' arguments: the same arrays all run (the state's and ours).
        self._arguments = (
            state.gpu_free, state.cpu_free, state.node_version, self._version,
            workload is not None, *self._classes, state.gpu_exists, state.gpu_capacity,
            state.num_gpus.astype(np.int64), power.idle_w, power.full_w, power.sockets,
            state.cpu_capacity, self._frag, self.node_free_milli, self.node_gpu_w,
            self.node_cpu_w, self._totals,
        )  # fmt: skip

    def refresh(self) -> None:
        """Re-evaluate every node changed since the last refresh."""
        refresh = self._refresh
        if refresh is None:  # its arguments keep their types: resolved once
            refresh = self._refresh = resolve(_kernel().refresh_nodes, *self._arguments)
        refresh(*self._arguments)

    @property
    def allocated_milli(self) -> float:
        return self._total_milli - float(self._totals[0])

    @property
    def fragmentation_rate(self) -> float:
        """Cluster fragmentation / free milli; NaN without a target workload."""
        if self.workload is None:
            return float("nan")
        free = float(self._totals[0])
        return float(self._totals[1]) / free if free > 0 else 0.0

    @property
    def power_w(self) -> tuple[float, float]:
        return float(self._totals[2]), float(self._totals[3])

    def figures(self) -> tuple[float, float, float, float]:
        """(allocated milli, fragmentation rate, GPU watts, CPU watts), as last refreshed."""
        free, fragmentation, gpu_w, cpu_w = self._totals.tolist()
        rate = fragmentation / free if free > 0 else 0.0
        if self.workload is None:
            rate = float("nan")
        return self._total_milli - free, rate, gpu_w, cpu_w
