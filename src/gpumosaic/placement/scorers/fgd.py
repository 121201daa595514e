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

from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.fragmentation import (
    FragmentationTracker,
    shared_tracker,
)
from gpumosaic.placement.scorers.base import MAX_SCORE, Nodes, Scorer, Scores, Slots
from gpumosaic.placement.workload import TargetWorkload


class FgdScorer(Scorer):
    name = "fgd"

    def __init__(self, workload: TargetWorkload, exact: bool = False) -> None:
        self.workload = workload
        self.exact = exact
        self.name = "fgd-exact" if exact else "fgd"
        self._tracker: FragmentationTracker | None = None

    def tracker(self, state: ClusterState) -> FragmentationTracker:
        """Per-node fragmentation of ``state``, brought up to date."""
        tracker = self._tracker
        if tracker is None or tracker.state is not state:
            tracker = self._tracker = shared_tracker(state, self.workload)
        else:
            tracker.refresh()
        return tracker

    def candidate_scores(self, state: ClusterState, job: JobSpec, nodes: Nodes) -> Scores:
        """(K, C) scores of each candidate GPU choice; -inf where the GPU does not fit.
        C = GPU slots for a fractional job, 1 otherwise."""
        tracker = self.tracker(state)
        classes = tracker.classes
        node_ok = tracker.node_ok(nodes, state.cpu_free[nodes] - job.cpu_milli)
        fit = tracker.fit_count[nodes][:, None, :]
        below = tracker.below[nodes][:, None, :]
        if job.is_fractional:
            free = state.gpu_free[nodes]
            d_fit, d_below = tracker.gpu_deltas(job.gpu_milli)
            after_frag = tracker.frag_of(
                node_ok,
                fit + d_fit[free],
                below + d_below[free],
                (tracker.free[nodes] - job.gpu_milli)[:, None],
            )
        else:
            k = job.num_gpu
            d_fit = (classes.fit_table[0] - classes.fit_table[MILLI_PER_GPU]) * k
            d_below = (classes.below_table[0] - classes.below_table[MILLI_PER_GPU]) * k
            after_frag = tracker.frag_of(
                node_ok,
                fit + d_fit,
                below + d_below,
                (tracker.free[nodes] - job.total_gpu_milli)[:, None],
            )
        x = (tracker.frag[nodes][:, None] - after_frag) / 1000.0
        score = 1.0 / (1.0 + np.exp(-x)) * MAX_SCORE
        if not self.exact:
            score = np.trunc(score)
        if job.is_fractional:
            score[free < job.gpu_milli] = -np.inf
        return score

    def raw_scores(self, state: ClusterState, job: JobSpec, nodes: Nodes) -> Scores:
        return self.candidate_scores(state, job, nodes).max(axis=1)

    def scores_and_slots(
        self, state: ClusterState, job: JobSpec, nodes: Nodes
    ) -> tuple[Scores, Slots | None]:
        if not job.is_fractional:
            return self.raw_scores(state, job, nodes), None
        scores = self.candidate_scores(state, job, nodes)
        return scores.max(axis=1), scores.argmax(axis=1)

    def fractional_slot(
        self, state: ClusterState, job: JobSpec, node: int, rng: np.random.Generator
    ) -> int:
        scores = self.candidate_scores(state, job, np.array([node], dtype=np.intp))[0]
        return int(np.argmax(scores))
