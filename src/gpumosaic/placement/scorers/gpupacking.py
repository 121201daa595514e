"""GpuPacking: fill partly used GPUs first, then used nodes, then the smallest idle nodes.

(a) the job fits on partly used GPUs (best-fit choice) -> 100 - (sum over those GPUs of
    free% (integer)) // 10, at least 50;
(b) it needs fully free GPUs on a node that has a used GPU -> 50 - (fully free GPUs it
    takes), at least 33;
(c) every GPU of the node is free -> 33 - (GPUs on the node).
CPU-only jobs score 0. GPU choice: best fit.
"""

from __future__ import annotations

import numpy as np

from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.scorers.base import MAX_SCORE, Nodes, Scorer, Scores

HALF = MAX_SCORE // 2
THIRD = MAX_SCORE // 3


class GpuPackingScorer(Scorer):
    name = "gpupacking"

    def raw_scores(self, state: ClusterState, job: JobSpec, nodes: Nodes) -> Scores:
        if job.num_gpu == 0:
            return np.zeros(len(nodes))
        free = state.gpu_free[nodes].astype(np.int64)
        fully_free = (free >= MILLI_PER_GPU).sum(axis=1)
        idle_node = fully_free == state.num_gpus[nodes]
        idle_score = np.maximum(THIRD - fully_free, fully_free)
        if job.is_fractional:
            # Best-fit GPU: the least free one that fits (nodes are feasible, so one does).
            chosen = np.where(free >= job.gpu_milli, free, MILLI_PER_GPU + 1).min(axis=1)
            shared = np.maximum(MAX_SCORE - (chosen * 100 // MILLI_PER_GPU) // 10, HALF)
            used = np.where(chosen >= MILLI_PER_GPU, np.maximum(HALF - 1, THIRD), shared)
        else:
            used = np.full(len(nodes), max(HALF - job.num_gpu, THIRD))
        return np.where(idle_node, idle_score, used).astype(np.float64)
