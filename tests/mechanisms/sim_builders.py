"""Small builders for simulator tests: clusters, duration jobs and workloads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gpumosaic.model import ClusterSpec, JobSpec, NodeSpec, gpu_model
from gpumosaic.results.result import SimResult
from gpumosaic.workloads.throughputs import ConstantThroughputs
from gpumosaic.workloads.workload import Workload


def node(
    name: str, gpus: int = 1, model: str = "V100", cpu: int = 64_000, mem: int = 262_144
) -> NodeSpec:
    return NodeSpec(name, gpu_model(model), gpus, cpu, mem)


def cluster(*nodes: NodeSpec) -> ClusterSpec:
    return ClusterSpec(tuple(nodes))


def job(
    job_id: int,
    arrival: float = 0.0,
    duration: float = 100.0,
    num_gpu: int = 1,
    milli: int = 1000,
    cpu: int = 0,
    mem: int = 0,
    models: frozenset[str] | None = None,
) -> JobSpec:
    return JobSpec(
        id=job_id,
        arrival_s=arrival,
        job_type="t",
        num_gpu=num_gpu,
        gpu_milli=milli if num_gpu else 0,
        work=duration,
        cpu_milli=cpu,
        memory_mib=mem,
        allowed_models=models,
        name=f"job{job_id}",
    )


def workload(jobs: Sequence[JobSpec], measure: tuple[int, int] | None = None) -> Workload:
    ordered = tuple(sorted(jobs, key=lambda j: (j.arrival_s, j.id)))
    return Workload("test", ordered, ConstantThroughputs(), measure)


def simulate(
    cluster: ClusterSpec,
    workload: Workload,
    placement: str = "fgd",
    order: str = "fifo",
    seed: int = 0,
    **options: Any,
) -> SimResult:
    """The event simulator with a placement and a queue order built by name through the
    road (``run/parts.py``) against the workload's target, and the Generator of ``seed``."""
    from gpumosaic.mechanisms.event.simulator import EventSimulator
    from gpumosaic.placement.workload import TargetWorkload
    from gpumosaic.policies.ordering import build_queue_order
    from gpumosaic.run.parts import build_placement_for

    target = TargetWorkload.from_jobs(workload.target_sample())
    strategy = build_placement_for(placement, target)
    rng = np.random.default_rng(seed)
    sim = EventSimulator(
        cluster, workload, strategy, build_queue_order(order), rng=rng, target=target, **options
    )
    return sim.run()
