"""GpuClustering: keep tasks of one kind ("sharing" or k whole GPUs) together.

Bands by the kinds of GPU tasks already on the node: only the job's kind -> 75;
its kind among others -> 50; no GPU task -> 25; only other kinds -> 0. Within a band add
25 * (8000 - free GPU milli) // 8000 (integer, as the reference), so fuller nodes first.
CPU-only jobs score 0 everywhere.
"""

from __future__ import annotations

import numpy as np

from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import SHARING_KIND, ClusterState
from gpumosaic.placement.scorers.base import (
    MAX_SCORE,
    MAX_SPEC_GPU,
    Nodes,
    Scorer,
    Scores,
    trunc_div,
)

QUARTER = MAX_SCORE // 4


class GpuClusteringScorer(Scorer):
    name = "gpuclustering"

    def raw_scores(self, state: ClusterState, job: JobSpec, nodes: Nodes) -> Scores:
        if job.num_gpu == 0:
            return np.zeros(len(nodes))
        present = state.kind_count[nodes] > 0  # (K, kinds)
        kind = SHARING_KIND if job.is_fractional else job.num_gpu
        own = present[:, kind] if kind < present.shape[1] else np.zeros(len(nodes), bool)
        kinds = present.sum(axis=1)
        band = np.where(own, np.where(kinds == 1, 3, 2), np.where(kinds == 0, 1, 0)) * QUARTER
        used = MAX_SPEC_GPU - state.gpu_free[nodes].sum(axis=1).astype(np.int64)
        return (trunc_div(QUARTER * used, MAX_SPEC_GPU) + band).astype(np.float64)
