"""A named placement strategy as Gandiva's order among the servers of one affinity tier.

Gandiva keeps its affinity tiers (``affinity.choose_server``); inside the chosen
tier a strategy from the placement registry replaces "least loaded first". The
strategy's own vectorized scores over ClusterState decide (``ScoredPlacement.scores``,
normalized across the tier's candidates as across feasible nodes in a normal placement);
equal scores keep Gandiva's seeded server order. ``random`` has no scores (it picks a
node outright), so each candidate gets a uniform draw: one of them uniformly at random.

Scored is the job as Gandiva allocates it: k whole GPUs and no CPU or memory, since a
GPU set is held in ClusterState exactly so (a fractional job takes a whole GPU). FGD's
target workload is built from the same shapes, so its fragmentation is measured against
the requests Gandiva actually makes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

import numpy as np

from gpumosaic.mechanisms.gandiva.affinity import Rank, ServerView
from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.base import PlacementStrategy
from gpumosaic.placement.scorers import RandomPlacement, ScoredPlacement
from gpumosaic.placement.workload import TargetWorkload

# The placement name that means Gandiva's own order (least loaded first within a tier).
AFFINITY = "affinity"


def as_group_job(job: JobSpec, k: int) -> JobSpec:
    """``job`` as the GPU set Gandiva holds for it: k whole GPUs, nothing else."""
    return replace(job, num_gpu=k, gpu_milli=MILLI_PER_GPU, cpu_milli=0, memory_mib=0)


def is_affinity(name: str) -> bool:
    """True when a placement name asks for Gandiva's own order."""
    return name.strip().lower() == AFFINITY


def gandiva_target(jobs: Iterable[JobSpec]) -> TargetWorkload:
    """The target workload of ``jobs`` as Gandiva places them (whole GPUs, no CPU)."""
    sample = list(jobs)
    shapes = [as_group_job(j, j.num_gpu) for j in sample if j.num_gpu > 0]
    return TargetWorkload.from_jobs(shapes or sample)


class TierRanker:
    """Scores a tier's candidate servers for one job by a placement strategy."""

    def __init__(
        self, strategy: PlacementStrategy, state: ClusterState, rng: np.random.Generator
    ) -> None:
        if not isinstance(strategy, ScoredPlacement | RandomPlacement):
            raise ValueError(f"placement {strategy.name!r} has no node scores to rank with")
        self.strategy = strategy
        self.state = state
        self.rng = rng

    def rank(self, job: JobSpec, k: int) -> Rank:
        """The ``rank`` argument of ``choose_server`` for a k-GPU ``job``."""
        group_job = as_group_job(job, k)

        def scores(servers: Sequence[ServerView]) -> Sequence[float]:
            if isinstance(self.strategy, RandomPlacement):
                drawn: list[float] = self.rng.random(len(servers)).tolist()
                return drawn
            nodes = np.fromiter((s.node for s in servers), dtype=np.intp, count=len(servers))
            ranked: list[float] = self.strategy.scores(self.state, group_job, nodes).tolist()
            return ranked

        return scores
