"""Small builders for the Gandiva tests: jobs, clusters and a hand-made throughput table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gpumosaic.mechanisms.gandiva.ranking import gandiva_target, is_affinity
from gpumosaic.mechanisms.gandiva.sim import run_gandiva
from gpumosaic.model import ClusterSpec, JobSpec
from gpumosaic.placement.registry import build_placement
from gpumosaic.policies.ordering import build_queue_order
from gpumosaic.results.result import SimResult
from gpumosaic.workloads.throughputs import ConstantThroughputs, GavelThroughputTable
from gpumosaic.workloads.workload import Workload

# Job types of the hand-made table: every job runs 1 step/s alone on a V100 at any scale;
# "good" pairs keep 0.8 of their speed each (sum 1.6), "bad" pairs 0.4 each (sum 0.8).
GOOD, BAD = "good", "bad"


def job(
    job_id: int,
    work: float,
    arrival: float = 0.0,
    k: int = 1,
    job_type: str = "x",
    memory: int | None = None,
    gpu_time: float = 1.0,
    priority: float = 1.0,
) -> JobSpec:
    return JobSpec(
        id=job_id,
        arrival_s=arrival,
        job_type=job_type,
        num_gpu=k,
        gpu_milli=1000,
        work=work,
        gpu_memory_mib=memory,
        gpu_time_fraction=gpu_time,
        priority_weight=priority,
        name=f"j{job_id}",
    )


def v100s(servers: int, per_server: int) -> ClusterSpec:
    return ClusterSpec.from_counts([("v100", servers * per_server)], gpus_per_node=per_server)


def constant_workload(jobs: Sequence[JobSpec]) -> Workload:
    return Workload("test", list(jobs), ConstantThroughputs())


def pair_table() -> GavelThroughputTable:
    isolated = {
        "v100": {(t, sf): 1.0 for t in (GOOD, BAD) for sf in (1, 2, 4)},
    }
    packed = {
        "v100": {
            ((GOOD, 1), (GOOD, 1)): (0.8, 0.8),
            ((BAD, 1), (BAD, 1)): (0.4, 0.4),
            ((GOOD, 1), (BAD, 1)): (0.5, 0.4),
            ((BAD, 1), (GOOD, 1)): (0.4, 0.5),
        },
    }
    return GavelThroughputTable(isolated, packed, "test-pairs")


def table_workload(jobs: Sequence[JobSpec]) -> Workload:
    return Workload("test-pairs", list(jobs), pair_table())


def run_named(
    cluster: ClusterSpec,
    workload: Workload,
    seed: int = 0,
    *,
    order: str = "fifo",
    placement: str | None = None,
    **config: Any,
) -> SimResult:
    """``run_gandiva`` with its objects built from names as ``run.build`` builds them: the
    run's Generator from ``seed`` (drawn from by nothing else), the queue order, and a
    placement strategy scoring against the jobs as Gandiva places them (None or
    ``affinity``: Gandiva's own order)."""
    strategy = None
    if placement is not None and not is_affinity(placement):
        strategy = build_placement(placement, gandiva_target(workload.target_sample()))
    return run_gandiva(
        cluster,
        workload,
        np.random.default_rng(seed),
        order=build_queue_order(order),
        placement=strategy,
        **config,
    )
