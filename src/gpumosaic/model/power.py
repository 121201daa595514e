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
    state: ClusterState,
    gpu_free: npt.NDArray[np.int32] | None = None,
    cpu_free: npt.NDArray[np.int64] | None = None,
    nodes: npt.NDArray[np.intp] | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(GPU watts, CPU watts) per node; a GPU with any allocation draws full power."""
    idx = np.arange(state.num_nodes) if nodes is None else nodes
    g = state.gpu_free[idx] if gpu_free is None else gpu_free
    c = state.cpu_free[idx] if cpu_free is None else cpu_free
    idle, full = gpu_power_table(state)
    exists = state.gpu_exists[idx]
    busy_gpus = (exists & (g < state.gpu_capacity[idx])).sum(axis=1)
    idle_gpus = exists.sum(axis=1) - busy_gpus
    gpu_w = busy_gpus * full[idx] + idle_gpus * idle[idx]
    total_sockets = sockets(state.cpu_capacity[idx])
    active = np.minimum(sockets(state.cpu_capacity[idx] - c), total_sockets)
    cpu_w = active * SOCKET_FULL_W + (total_sockets - active) * SOCKET_IDLE_W
    return gpu_w, cpu_w


def cluster_power_w(state: ClusterState) -> tuple[float, float]:
    """(GPU watts, CPU watts) for the whole cluster."""
    gpu_w, cpu_w = node_power_w(state)
    return float(gpu_w.sum()), float(cpu_w.sum())


class NodePower:
    """Power of single nodes in plain floats, for trackers that update one touched node
    at a time (numpy costs more than the arithmetic on a handful of GPUs). The values are
    bit-identical to ``node_power_w``: the same operations, in scalars."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        idle, full = gpu_power_table(state)
        self._idle, self._full = idle.tolist(), full.tolist()
        self._sockets = sockets(state.cpu_capacity).tolist()
        self._num_gpus = state.num_gpus.tolist()

    def node_w(self, node: int) -> tuple[float, float]:
        """(GPU watts, CPU watts) of ``node`` now."""
        state = self.state
        gpus = self._num_gpus[node]
        capacity = MILLI_PER_GPU
        busy = sum(1 for free in state.gpu_free[node, :gpus].tolist() if free < capacity)
        gpu_w = busy * self._full[node] + (gpus - busy) * self._idle[node]
        used = int(state.cpu_capacity[node] - state.cpu_free[node])
        total = self._sockets[node]
        cores = math.ceil(used / (1000 * VCPU_PER_CORE))
        active = min(math.ceil(cores / CORES_PER_SOCKET), total)
        cpu_w = active * SOCKET_FULL_W + (total - active) * SOCKET_IDLE_W
        return gpu_w, cpu_w
