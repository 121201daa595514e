"""Power model of the PWR paper: GPUs at idle or full power, CPU sockets idle or active."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from gpumosaic.model.gpu import MILLI_PER_GPU, gpu_model
from gpumosaic.model.state import ClusterState

CORES_PER_SOCKET = 16
VCPU_PER_CORE = 2
SOCKET_IDLE_W = 15.0
SOCKET_FULL_W = 120.0


def gpu_power_table(state: ClusterState) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(idle_w, full_w) per node, from each node's GPU model."""
    models = [gpu_model(name) for name in state.model_names]
    idle = np.array([m.idle_w for m in models], dtype=np.float64)
    full = np.array([m.full_w for m in models], dtype=np.float64)
    return idle[state.node_model], full[state.node_model]


def sockets(cpu_milli: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """CPU sockets needed for ``cpu_milli`` (2 vCPU per core, 16 cores per socket)."""
    cores = np.ceil(cpu_milli / (1000 * VCPU_PER_CORE))
    return np.ceil(cores / CORES_PER_SOCKET).astype(np.int64)


def node_power_w(
    state: ClusterState, nodes: npt.NDArray[np.intp] | None = None
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(GPU watts, CPU watts) per node (of ``nodes``, default all), now."""
    tracker = PowerTracker(state)
    if nodes is None:
        return tracker.node_gpu_w, tracker.node_cpu_w
    return tracker.node_gpu_w[nodes], tracker.node_cpu_w[nodes]


def cluster_power_w(state: ClusterState) -> tuple[float, float]:
    """(GPU watts, CPU watts) for the whole cluster, now."""
    return PowerTracker(state).power_w


class PowerTracker:
    """The cluster's power, kept current node by node: the one place the PWR power model
    is evaluated (a GPU with any allocation draws full power, the others idle power; CPU
    sockets are active by busy cores, ``ceil(busy cores / 16)``).

    ``update(nodes)`` re-evaluates the given nodes; ``touch(node)`` re-evaluates one node
    if its ``state.node_version`` moved (a driver that knows what it touched); ``power_w``
    first re-evaluates every node whose version moved since it was last evaluated, so
    reading it is always current and costs O(touched nodes); ``totals`` reads the totals
    as they are. The totals are kept by difference as nodes change: every GPU model's
    watts are whole numbers (``model/gpu.py``), so every per-node figure is a whole
    number of watts and the running totals equal a fresh sum exactly."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        # Per-node constants, computed once (and as plain lists for the one-node path):
        # idle and full watts of the node's GPUs, its GPUs, its CPU sockets.
        self.idle_w, self.full_w = gpu_power_table(state)
        self.gpus = state.gpu_exists.sum(axis=1)
        self.sockets = sockets(state.cpu_capacity)
        self._constants = list(
            zip(
                self.idle_w.tolist(),
                self.full_w.tolist(),
                self.gpus.tolist(),
                self.sockets.tolist(),
                state.cpu_capacity.tolist(),
                strict=True,
            )
        )
        self.node_gpu_w = np.zeros(state.num_nodes)
        self.node_cpu_w = np.zeros(state.num_nodes)
        self._gpu_total = 0.0
        self._cpu_total = 0.0
        self._version = state.node_version.copy()
        self.update(np.arange(state.num_nodes))

    def watts(
        self,
        idx: npt.NDArray[np.intp],
        busy_gpus: npt.NDArray[np.int64],
        busy_cpu_milli: npt.NDArray[np.int64],
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """(GPU watts, CPU watts) of nodes ``idx`` (repeats allowed) with ``busy_gpus``
        GPUs holding any allocation and ``busy_cpu_milli`` allocated, without reading
        the state (a driver that replays its allocations evaluates past states)."""
        gpu_w = busy_gpus * self.full_w[idx] + (self.gpus[idx] - busy_gpus) * self.idle_w[idx]
        total = self.sockets[idx]
        active = np.minimum(sockets(busy_cpu_milli), total)
        return gpu_w, active * SOCKET_FULL_W + (total - active) * SOCKET_IDLE_W

    def update(self, idx: npt.NDArray[np.intp]) -> None:
        """Re-evaluate nodes ``idx``."""
        state = self.state
        busy = (state.gpu_exists[idx] & (state.gpu_free[idx] < state.gpu_capacity[idx])).sum(axis=1)
        self.node_gpu_w[idx], self.node_cpu_w[idx] = self.watts(
            idx, busy, state.cpu_capacity[idx] - state.cpu_free[idx]
        )
        self._version[idx] = state.node_version[idx]
        self._gpu_total = float(self.node_gpu_w.sum())
        self._cpu_total = float(self.node_cpu_w.sum())

    def touch(self, node: int) -> None:
        """Re-evaluate ``node`` if it changed since it was last evaluated: ``update`` for
        one node in plain Python numbers (the same operations, so the same watts)."""
        state = self.state
        version = int(state.node_version[node])
        if version == self._version[node]:
            return
        idle_w, full_w, gpus, total, cpu_capacity = self._constants[node]
        free = state.gpu_free[node, :gpus].tolist()
        busy = gpus - free.count(MILLI_PER_GPU)
        gpu_w = busy * full_w + (gpus - busy) * idle_w
        cores = math.ceil((cpu_capacity - int(state.cpu_free[node])) / (1000 * VCPU_PER_CORE))
        active = min(math.ceil(cores / CORES_PER_SOCKET), total)
        cpu_w = active * SOCKET_FULL_W + (total - active) * SOCKET_IDLE_W
        self._gpu_total += gpu_w - float(self.node_gpu_w[node])
        self._cpu_total += cpu_w - float(self.node_cpu_w[node])
        self.node_gpu_w[node] = gpu_w
        self.node_cpu_w[node] = cpu_w
        self._version[node] = version

    def refresh(self) -> None:
        """Re-evaluate the nodes whose allocation changed since they were last evaluated."""
        stale = np.flatnonzero(self._version != self.state.node_version)
        if len(stale) == 1:
            self.touch(int(stale[0]))
        elif len(stale):
            self.update(stale)

    @property
    def totals(self) -> tuple[float, float]:
        """(GPU watts, CPU watts) of the whole cluster as last evaluated."""
        return self._gpu_total, self._cpu_total

    @property
    def power_w(self) -> tuple[float, float]:
        """(GPU watts, CPU watts) of the whole cluster."""
        self.refresh()
        return self.totals
