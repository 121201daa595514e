"""FGD (fragmentation gradient descent, ATC'23): the placement that grows the node's
fragmentation the least wins.

Delta = F_n(after) - F_n(before) for the target workload M (placement.fragmentation);
score = trunc(100 * sigmoid(-Delta / 1000)), or the float without truncation in exact mode.
No normalization. A fractional job tries every GPU that fits and keeps the best (first
slot on ties, as the reference); whole-GPU and CPU-only jobs have one candidate.
The truncated mode matters: its coarse scores leave ties that the random node order
breaks, and that is what reproduces the published numbers (DESIGN.md).

The arithmetic is compiled (``placement.kernel.fgd``: ``fgd_node``); this class hands it
the shared fragmentation tracker's counts.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache

import numpy as np
import numpy.typing as npt

from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.fragmentation import FragmentationTracker, shared_tracker
from gpumosaic.placement.scorers.base import KernelInputs, Scorer
from gpumosaic.placement.workload import TargetWorkload


@cache
def score_thresholds() -> npt.NDArray[np.float64]:
    """The truncated score's thresholds (``kernel.score_thresholds``), once per process."""
    from gpumosaic.placement import kernel

    return kernel.score_thresholds()


class FgdScorer(Scorer):
    name = "fgd"
    kernel_kind = 0  # kernel.FGD

    def __init__(self, workload: TargetWorkload, exact: bool = False) -> None:
        self.workload = workload
        self.exact = exact
        self.name = "fgd-exact" if exact else "fgd"
        self.kernel_kind = 8 if exact else 0  # kernel.FGD_EXACT, kernel.FGD
        self.object_mode = exact  # numpy's own sigmoid (``kernel.fgd``)
        self._tracker: FragmentationTracker | None = None

    def tracker(self, state: ClusterState) -> FragmentationTracker:
        """Per-node fragmentation of ``state`` (the shared tracker). Its stale nodes are
        recounted by whichever kernel reads them, or by ``refresh``."""
        tracker = self._tracker
        if tracker is None or tracker.state is not state:
            tracker = self._tracker = shared_tracker(state, self.workload)
        return tracker

    def kernel_inputs(self, state: ClusterState, job: JobSpec, into: KernelInputs) -> KernelInputs:
        tracker = self.tracker(state)
        c = tracker.classes
        d_fit, d_below = tracker.job_deltas(job.num_gpu, job.gpu_milli)
        return replace(
            into,
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
