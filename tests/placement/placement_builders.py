"""Small builders for placement tests: clusters of a few nodes, jobs, occupied GPUs."""

from __future__ import annotations

import itertools

import numpy as np

from gpumosaic.model.cluster import ClusterSpec, NodeSpec
from gpumosaic.model.gpu import gpu_model
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement.workload import TargetWorkload, TaskClass

_ids = itertools.count(10_000)


def cluster(*nodes: tuple[str, int, int]) -> ClusterState:
    """Nodes as (GPU model, GPUs, milli-CPU); memory is plentiful."""
    specs = tuple(
        NodeSpec(f"n{i}", gpu_model(model), gpus, cpu, 1 << 20)
        for i, (model, gpus, cpu) in enumerate(nodes)
    )
    return ClusterState(ClusterSpec(specs))


def job(num_gpu: int, milli: int = 1000, cpu: int = 0, models: str | None = None) -> JobSpec:
    allowed = None if models is None else frozenset(models.upper().split("|"))
    return JobSpec(
        id=next(_ids),
        arrival_s=0.0,
        job_type="t",
        num_gpu=num_gpu,
        gpu_milli=milli if num_gpu else 0,
        work=1.0,
        cpu_milli=cpu,
        allowed_models=allowed,
    )


def occupy(state: ClusterState, node: int, gpus: tuple[int, ...], milli: int, cpu: int = 0) -> None:
    """Put a task holding ``milli`` on each of ``gpus`` (and ``cpu``) on ``node``."""
    state.allocate(Assignment(next(_ids), node, gpus, milli, cpu, 0))


def workload(*classes: tuple[int, int, int, float]) -> TargetWorkload:
    """Classes as (num_gpu, gpu_milli, cpu, popularity)."""
    return TargetWorkload(
        tuple(TaskClass(cpu, milli, n, None) for n, milli, cpu, _ in classes),
        np.array([p for *_, p in classes], dtype=np.float64),
    )


def all_nodes(state: ClusterState) -> np.ndarray:
    return np.arange(state.num_nodes, dtype=np.intp)
