"""GpuPacking: fill partly used GPUs first, then used nodes, then the smallest idle nodes.

(a) the job fits on partly used GPUs (best-fit choice) -> 100 - (sum over those GPUs of
    free% (integer)) // 10, at least 50;
(b) it needs fully free GPUs on a node that has a used GPU -> 50 - (fully free GPUs it
    takes), at least 33;
(c) every GPU of the node is free -> 33 - (GPUs on the node).
CPU-only jobs score 0. GPU choice: best fit. The arithmetic is compiled
(``placement.kernel.scores.gpupacking_node``).
"""

from __future__ import annotations

from gpumosaic.placement.scorers.base import Scorer


class GpuPackingScorer(Scorer):
    name = "gpupacking"
    kernel_kind = 5  # kernel.GPUPACKING
