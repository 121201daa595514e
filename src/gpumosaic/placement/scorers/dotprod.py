"""DotProd (Tetris): the node fullest in the dimensions the job needs wins.

Node vector (free CPU / 128000, free GPU milli / 8000), job vector (CPU / 128000,
requested GPU milli / 8000); score = trunc(100 * (1 - dot / 2)). No normalization.
"""

from __future__ import annotations

import numpy as np

from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.scorers.base import (
    MAX_SCORE,
    MAX_SPEC_CPU,
    MAX_SPEC_GPU,
    Nodes,
    Scorer,
    Scores,
)


class DotProdScorer(Scorer):
    name = "dotprod"

    def raw_scores(self, state: ClusterState, job: JobSpec, nodes: Nodes) -> Scores:
        node_cpu = state.cpu_free[nodes] / MAX_SPEC_CPU
        node_gpu = state.gpu_free[nodes].sum(axis=1) / MAX_SPEC_GPU
        dot = node_cpu * (job.cpu_milli / MAX_SPEC_CPU) + node_gpu * (
            job.total_gpu_milli / MAX_SPEC_GPU
        )
        return np.trunc(MAX_SCORE * (1.0 - dot / 2))
