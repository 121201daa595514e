"""FirstFit: the feasible node with the lowest index; the lowest-index GPU that fits."""

from __future__ import annotations

import numpy as np

from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.gpu_choice import first_fit_gpu
from gpumosaic.placement.scorers.base import Nodes, Scorer, Scores


class FirstFitScorer(Scorer):
    name = "firstfit"
    reads_node_index = True

    def raw_scores(self, state: ClusterState, job: JobSpec, nodes: Nodes) -> Scores:
        # Unique per node, so the random tie-break never applies.
        return -nodes.astype(np.float64)

    def fractional_slot(
        self, state: ClusterState, job: JobSpec, node: int, rng: np.random.Generator
    ) -> int:
        return first_fit_gpu(state.gpu_free[node], job.gpu_milli)
