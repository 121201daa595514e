"""BestFit: least CPU and GPU left after placement wins.

raw = trunc(100 * (1 - [0.5 * (cpu free - cpu) / 128000 + 0.5 * (gpu free - gpu) / 8000])),
then the reference's integer min-max normalization over feasible nodes (all equal -> 0).
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
    minmax,
)


class BestFitScorer(Scorer):
    name = "bestfit"

    def raw_scores(self, state: ClusterState, job: JobSpec, nodes: Nodes) -> Scores:
        cpu_left = (state.cpu_free[nodes] - job.cpu_milli) / MAX_SPEC_CPU * 0.5
        gpu_free = state.gpu_free[nodes].sum(axis=1)
        gpu_left = (gpu_free - job.total_gpu_milli) / MAX_SPEC_GPU * 0.5
        return np.trunc((1.0 - (cpu_left + gpu_left)) * MAX_SCORE)

    def normalize(self, raw: Scores) -> Scores:
        return minmax(raw, all_equal=0.0)
