"""WorstFit ("strided" in the spatial-sharing report): most free first.

Node order: most free GPU milli left after placement first, then most free CPU left
(lexicographic; the score packs both into one exact float). A fractional job takes the
fitting GPU with the most free milli, so on one-GPU-per-node Gavel clusters the job lands
on the GPU with the most free milli in the cluster. Remaining ties: the random node order.
The arithmetic is compiled (``placement.kernel.scores.worstfit_node``).
"""

from __future__ import annotations

from dataclasses import replace

from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.scorers.base import KernelInputs, Scorer


class WorstFitScorer(Scorer):
    name = "worstfit"
    kernel_kind = 1  # kernel.WORSTFIT

    def kernel_inputs(self, state: ClusterState, job: JobSpec, into: KernelInputs) -> KernelInputs:
        return replace(into, cpu_scale=float(state.cpu_capacity.max(initial=0) + 1))
