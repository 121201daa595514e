"""Random: one feasible node uniformly at random, and a random fitting GPU on it."""

from __future__ import annotations

import numpy as np

from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement.filter import feasible_nodes
from gpumosaic.placement.gpu_choice import random_gpu
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
    """Not a scorer: the reference picks the node in PreScore, so it cannot be weighted."""

    name = "random"

    def __init__(self) -> None:
        self._gpu = _RandomGpu()

    def place(
        self, state: ClusterState, job: JobSpec, rng: np.random.Generator
    ) -> Assignment | None:
        nodes = np.flatnonzero(feasible_nodes(state, job))
        if not len(nodes):
            return None
        node = int(nodes[rng.integers(len(nodes))])
        return self._gpu.assignment(state, job, node, rng)
