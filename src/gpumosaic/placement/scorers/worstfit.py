"""WorstFit ("strided" in the spatial-sharing report): most free first.

Node order: most free GPU milli left after placement first, then most free CPU left
(lexicographic; the score packs both into one exact float). A fractional job takes the
fitting GPU with the most free milli, so on one-GPU-per-node Gavel clusters the job lands
on the GPU with the most free milli in the cluster. Remaining ties: the random node order.
"""

from __future__ import annotations

import numpy as np

from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.gpu_choice import worst_fit_gpu
from gpumosaic.placement.scorers.base import Nodes, Scorer, Scores


class WorstFitScorer(Scorer):
    name = "worstfit"

    def raw_scores(self, state: ClusterState, job: JobSpec, nodes: Nodes) -> Scores:
        cpu_scale = float(state.cpu_capacity.max(initial=0) + 1)
        gpu_left = state.gpu_free[nodes].sum(axis=1) - job.total_gpu_milli
        cpu_left = state.cpu_free[nodes] - job.cpu_milli
        return gpu_left * cpu_scale + cpu_left

    def fractional_slot(
        self, state: ClusterState, job: JobSpec, node: int, rng: np.random.Generator
    ) -> int:
        return worst_fit_gpu(state.gpu_free[node], job.gpu_milli)
