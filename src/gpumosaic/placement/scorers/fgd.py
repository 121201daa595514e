"""FGD (fragmentation gradient descent, ATC'23): the placement that grows the node's
fragmentation the least wins.

Delta = F_n(after) - F_n(before) for the target workload M (placement.fragmentation);
score = trunc(100 * sigmoid(-Delta / 1000)), or the float without truncation in exact mode.
No normalization. A fractional job tries every GPU that fits and keeps the best (first
slot on ties, as the reference); whole-GPU and CPU-only jobs have one candidate.
The truncated mode matters: its coarse scores leave ties that the random node order
breaks, and that is what reproduces the published numbers (DESIGN.md).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.fragmentation import (
    FragmentationTracker,
    gpu_change_deltas,
    shared_tracker,
)
from gpumosaic.placement.scorers.base import MAX_SCORE, Nodes, Scorer, Scores
from gpumosaic.placement.workload import TargetWorkload


class FgdScorer(Scorer):
    name = "fgd"

    def __init__(self, workload: TargetWorkload, exact: bool = False) -> None:
        self.workload = workload
        self.exact = exact
        self.name = "fgd-exact" if exact else "fgd"

    def tracker(self, state: ClusterState) -> FragmentationTracker:
        """Per-node fragmentation of ``state``, brought up to date."""
        return shared_tracker(state, self.workload)

    def candidate_scores(self, state: ClusterState, job: JobSpec, nodes: Nodes) -> Scores:
        """(K, C) scores of each candidate GPU choice; -inf where the GPU does not fit.
        C = GPU slots for a fractional job, 1 otherwise."""
        tracker = self.tracker(state)
        k = len(nodes)
        cpu_after = state.cpu_free[nodes] - job.cpu_milli
        valid: npt.NDArray[np.bool_]
        if job.is_fractional:
            free = state.gpu_free[nodes].astype(np.int64)
            valid = free >= job.gpu_milli
            d_fit, d_below = gpu_change_deltas(tracker.classes, free, free - job.gpu_milli)
            d_free = np.full(free.shape, -job.gpu_milli, dtype=np.int64)
        else:
            whole = np.array([[MILLI_PER_GPU]], dtype=np.int64)
            d_fit, d_below = gpu_change_deltas(tracker.classes, whole, whole * 0)
            d_fit, d_below = d_fit * job.num_gpu, d_below * job.num_gpu
            d_free = np.full((1, 1), -job.total_gpu_milli, dtype=np.int64)
            valid = np.ones((k, 1), dtype=bool)
        after = tracker.frag_after(nodes, d_fit, d_below, d_free, cpu_after)
        x = (tracker.frag[nodes][:, None] - after) / 1000.0
        score = 1.0 / (1.0 + np.exp(-x)) * MAX_SCORE
        if not self.exact:
            score = np.trunc(score)
        return np.where(valid, score, -np.inf)

    def raw_scores(self, state: ClusterState, job: JobSpec, nodes: Nodes) -> Scores:
        return self.candidate_scores(state, job, nodes).max(axis=1)

    def fractional_slot(
        self, state: ClusterState, job: JobSpec, node: int, rng: np.random.Generator
    ) -> int:
        scores = self.candidate_scores(state, job, np.array([node], dtype=np.intp))[0]
        return int(np.argmax(scores))
