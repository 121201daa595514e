"""WorstFit ("strided" in the spatial-sharing report): most free first.

Node order: most free GPU milli left after placement first, then most free CPU left
(lexicographic; the score packs both into one exact float). A fractional job takes the
fitting GPU with the most free milli, so on one-GPU-per-node Gavel clusters the job lands
on the GPU with the most free milli in the cluster. Remaining ties: the random node order.
The arithmetic is compiled (``placement.kernel.worstfit_node``).
"""

from __future__ import annotations

import numpy as np

from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.scorers.base import (
    CompiledScorer,
    KernelInputs,
    Nodes,
    Scores,
    Slots,
)


class WorstFitScorer(CompiledScorer):
    name = "worstfit"
    kernel_kind = 1  # kernel.WORSTFIT

    def kernel_inputs(self, state: ClusterState, job: JobSpec) -> KernelInputs:
        return KernelInputs.unused(cpu_scale=float(state.cpu_capacity.max(initial=0) + 1))

    def _scores(self, state: ClusterState, job: JobSpec, nodes: Nodes) -> tuple[Scores, Slots]:
        from gpumosaic.placement import kernel

        nodes = np.asarray(nodes, dtype=np.int64)
        scores = np.empty(len(nodes))
        slots = np.empty(len(nodes), dtype=np.int64)
        kernel.worstfit_scores(
            nodes, job.num_gpu, job.gpu_milli if job.num_gpu else 0, job.cpu_milli,
            self.kernel_inputs(state, job).cpu_scale, state.gpu_free, state.cpu_free,
            scores, slots,
        )  # fmt: skip
        return scores, slots

    def raw_scores(self, state: ClusterState, job: JobSpec, nodes: Nodes) -> Scores:
        return self._scores(state, job, nodes)[0]

    def fractional_slot(
        self, state: ClusterState, job: JobSpec, node: int, rng: np.random.Generator
    ) -> int:
        slot = int(self._scores(state, job, np.array([node], dtype=np.int64))[1][0])
        if slot < 0:
            raise ValueError(f"no GPU has {job.gpu_milli} milli free")
        return slot
