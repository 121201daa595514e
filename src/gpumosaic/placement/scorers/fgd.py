"""FGD (fragmentation gradient descent, ATC'23): the placement that grows the node's
fragmentation the least wins.

Delta = F_n(after) - F_n(before) for the target workload M (placement.fragmentation);
score = trunc(100 * sigmoid(-Delta / 1000)), or the float without truncation in exact mode.
No normalization. A fractional job tries every GPU that fits and keeps the best (first
slot on ties, as the reference); whole-GPU and CPU-only jobs have one candidate.
The truncated mode matters: its coarse scores leave ties that the random node order
breaks, and that is what reproduces the published numbers (DESIGN.md).

The arithmetic is compiled (``placement.kernel``: ``fgd_node``); this class hands it the
cluster's arrays and the shared fragmentation tracker's counts.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import numpy.typing as npt

from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.fragmentation import FragmentationTracker, shared_tracker
from gpumosaic.placement.scorers.base import (
    CompiledScorer,
    KernelInputs,
    Nodes,
    Scores,
    Slots,
)
from gpumosaic.placement.workload import TargetWorkload


@cache
def score_thresholds() -> npt.NDArray[np.float64]:
    """The truncated score's thresholds (``kernel.score_thresholds``), once per process."""
    from gpumosaic.placement import kernel

    return kernel.score_thresholds()


class FgdScorer(CompiledScorer):
    name = "fgd"
    kernel_kind = 0  # kernel.FGD

    def __init__(self, workload: TargetWorkload, exact: bool = False) -> None:
        self.workload = workload
        self.exact = exact
        self.name = "fgd-exact" if exact else "fgd"
        self._tracker: FragmentationTracker | None = None

    def tracker(self, state: ClusterState) -> FragmentationTracker:
        """Per-node fragmentation of ``state`` (the shared tracker). Its stale nodes are
        recounted by whichever kernel reads them, or by ``refresh``."""
        tracker = self._tracker
        if tracker is None or tracker.state is not state:
            tracker = self._tracker = shared_tracker(state, self.workload)
        return tracker

    def kernel_inputs(self, state: ClusterState, job: JobSpec) -> KernelInputs:
        tracker = self.tracker(state)
        c = tracker.classes
        d_fit, d_below = tracker.job_deltas(job.num_gpu, job.gpu_milli)
        return KernelInputs(
            exact=self.exact,
            cpu_scale=0.0,
            class_ok=c.class_ok,
            c_cpu=c.cpu,
            c_num_gpu=c.num_gpu,
            weight=c.weight,
            fit_table=c.fit_table,
            below_table=c.below_table,
            fit_count=tracker.fit_count,
            below=tracker.below,
            free=tracker.free,
            frag=tracker.frag,
            tracked=tracker.tracked,
            d_fit=d_fit,
            d_below=d_below,
            thresholds=score_thresholds(),
        )

    def candidate_scores(self, state: ClusterState, job: JobSpec, nodes: Nodes) -> Scores:
        """(K, C) scores of each candidate GPU choice; -inf where the GPU does not fit.
        C = GPU slots for a fractional job, 1 otherwise."""
        return self._scores(state, job, nodes)[0]

    def _scores(
        self, state: ClusterState, job: JobSpec, nodes: Nodes
    ) -> tuple[Scores, Scores, Slots]:
        from gpumosaic.placement import kernel

        k = self.kernel_inputs(state, job)
        nodes = np.asarray(nodes, dtype=np.int64)
        width = state.gpu_free.shape[1] if job.is_fractional else 1
        cand = np.empty((len(nodes), max(width, 1)))
        best = np.empty(len(nodes))
        slots = np.zeros(len(nodes), dtype=np.int64)
        kernel.fgd_scores(
            nodes, job.num_gpu, job.gpu_milli if job.num_gpu else 0, job.cpu_milli,
            k.exact, state.gpu_free, state.cpu_free, state.node_version, k.class_ok, k.c_cpu,
            k.c_num_gpu, k.weight, k.fit_table, k.below_table, k.fit_count, k.below, k.free,
            k.frag, k.tracked, k.d_fit, k.d_below, k.thresholds, cand, best, slots,
        )  # fmt: skip
        return cand[:, :width], best, slots

    def raw_scores(self, state: ClusterState, job: JobSpec, nodes: Nodes) -> Scores:
        return self._scores(state, job, nodes)[1]

    def scores_and_slots(
        self, state: ClusterState, job: JobSpec, nodes: Nodes
    ) -> tuple[Scores, Slots | None]:
        _, best, slots = self._scores(state, job, nodes)
        return best, (slots if job.is_fractional else None)

    def fractional_slot(
        self, state: ClusterState, job: JobSpec, node: int, rng: np.random.Generator
    ) -> int:
        return int(self._scores(state, job, np.array([node], dtype=np.int64))[2][0])
