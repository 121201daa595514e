"""Random: one feasible node uniformly at random, and a random fitting GPU on it."""

from __future__ import annotations

import numpy as np

from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement.filter import FeasibleSet, FilterKey, filter_key
from gpumosaic.placement.gpu_choice import exclusive_gpus, random_gpu
from gpumosaic.placement.scorers.base import Nodes, Scorer, Scores


class _RandomGpu(Scorer):
    name = "random"

    def raw_scores(self, state: ClusterState, job: JobSpec, nodes: Nodes) -> Scores:
        return np.zeros(len(nodes))  # no preference: the node is drawn uniformly

    def fractional_slot(
        self, state: ClusterState, job: JobSpec, node: int, rng: np.random.Generator
    ) -> int:
        return random_gpu(state.gpu_free[node], job.gpu_milli, rng)


class RandomPlacement:
    """Not a scorer: the reference picks the node in PreScore, so it cannot be weighted.

    The feasible nodes of each job shape are kept current incrementally (``FeasibleSet``),
    so a decision costs one pass over a boolean mask, not over every GPU.
    """

    name = "random"

    def __init__(self) -> None:
        self._gpu = _RandomGpu()
        self._state: ClusterState | None = None
        self._feasible: dict[FilterKey, FeasibleSet] = {}

    def place(
        self, state: ClusterState, job: JobSpec, rng: np.random.Generator
    ) -> Assignment | None:
        choice = self.choose(state, job, rng)
        if choice is None:
            return None
        node, gpus = choice
        return Assignment(
            job_id=job.id,
            node=node,
            gpus=gpus,
            gpu_milli=job.gpu_milli if job.num_gpu else 0,
            cpu_milli=job.cpu_milli,
            memory_mib=job.memory_mib,
        )

    def choose(
        self, state: ClusterState, job: JobSpec, rng: np.random.Generator
    ) -> tuple[int, tuple[int, ...]] | None:
        if self._state is not state:
            self._state, self._feasible = state, {}
        key = filter_key(job)
        feasible = self._feasible.get(key)
        if feasible is None:
            feasible = self._feasible[key] = FeasibleSet(state.num_nodes)
        stale = feasible.stale(state)
        if len(stale):
            feasible.update(state, job, stale)
        nodes = np.flatnonzero(feasible.mask)
        if not len(nodes):
            return None
        node = int(nodes[rng.integers(len(nodes))])
        if job.num_gpu == 0:
            return node, ()
        if not job.is_fractional:
            return node, exclusive_gpus(state.gpu_free[node], job.num_gpu)
        return node, (self._gpu.fractional_slot(state, job, node, rng),)
