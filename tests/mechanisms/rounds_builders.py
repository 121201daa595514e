"""Small builders for the round-mechanism tests: a hand-set policy and a worst-fit stand-in."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement.filter import feasible_nodes
from gpumosaic.policies.base import Allocation, PolicyInput, PolicyTraits, TypeOrder
from gpumosaic.results.result import SimResult
from gpumosaic.workloads.throughputs import ConstantThroughputs
from gpumosaic.workloads.workload import Workload


@dataclass
class FixedPolicy:
    """X from a function of the input; counts its calls."""

    matrix: Callable[[PolicyInput], np.ndarray]
    name: str = "test_fixed"
    traits: PolicyTraits = field(default_factory=lambda: PolicyTraits(type_order=TypeOrder.FIXED))
    calls: list[float] = field(default_factory=list)

    def allocate(self, inp: PolicyInput) -> Allocation:
        self.calls.append(inp.now_s)
        return Allocation(inp.job_ids, inp.gpu_types, self.matrix(inp))


def equal_share(inp: PolicyInput) -> np.ndarray:
    """Every job the same share of every type, scaled so capacity holds."""
    n, t = inp.num_jobs, len(inp.gpu_types)
    total = float(inp.capacity.sum())
    share = min(1.0, total / max(float(inp.demand.sum()), 1e-9))
    return np.tile(share * inp.capacity / total, (n, 1)).reshape(n, t)


class WorstFit:
    """Most free milli first; deterministic stand-in for the registry's strided."""

    name = "worst-fit-standin"

    def place(
        self, state: ClusterState, job: JobSpec, rng: np.random.Generator
    ) -> Assignment | None:
        ok = feasible_nodes(state, job)
        if not ok.any():
            return None
        free = np.where(ok, state.gpu_free.sum(axis=1), -1)
        node = int(np.argmax(free))
        row = state.gpu_free[node]
        fitting = np.flatnonzero(row >= job.gpu_milli)
        gpus = fitting[np.argsort(-row[fitting], kind="stable")][: job.num_gpu]
        return Assignment(
            job.id,
            node,
            tuple(int(g) for g in sorted(gpus)),
            job.gpu_milli,
            job.cpu_milli,
            job.memory_mib,
        )


def job(
    job_id: int,
    work: float,
    arrival: float = 0.0,
    milli: int = 1000,
    gpus: int = 1,
    span: bool = False,
) -> JobSpec:
    return JobSpec(
        id=job_id,
        arrival_s=arrival,
        job_type="t",
        num_gpu=gpus,
        gpu_milli=milli,
        work=work,
        name=f"job{job_id}",
        may_span_nodes=span,
    )


def workload(jobs: list[JobSpec], window: tuple[int, int] | None = None) -> Workload:
    return Workload("test", tuple(jobs), ConstantThroughputs(1.0), measure=window)


def v100s(count: int, per_node: int = 1) -> ClusterSpec:
    return ClusterSpec.from_counts([("v100", count)], gpus_per_node=per_node)


def run_rounds(
    cluster: ClusterSpec,
    workload: Workload,
    policy: object,
    placement: object = "strided",
    seed: int = 0,
    **options: object,
) -> SimResult:
    """``sim.rounds.run_rounds`` with the run's Generator seeded from ``seed``; a policy or
    placement given by name is built through the road (``run/parts.py``), as a run's is."""
    from gpumosaic.mechanisms.rounds.sim import run_rounds as simulate_rounds
    from gpumosaic.placement.workload import TargetWorkload
    from gpumosaic.run.parts import build_allocation_policy, build_placement_for

    rng = np.random.default_rng(seed)
    if isinstance(policy, str):
        policy = build_allocation_policy(policy, rng)
    if isinstance(placement, str):
        target = TargetWorkload.from_jobs(workload.target_sample())
        placement = build_placement_for(placement, target)
    return simulate_rounds(cluster, workload, policy, placement, rng, **options)  # type: ignore[arg-type]
