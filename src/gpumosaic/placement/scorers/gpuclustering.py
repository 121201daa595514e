"""GpuClustering: keep tasks of one kind ("sharing" or k whole GPUs) together.

Bands by the kinds of GPU tasks already on the node: only the job's kind -> 75;
its kind among others -> 50; no GPU task -> 25; only other kinds -> 0. Within a band add
25 * (8000 - free GPU milli) // 8000 (integer, as the reference), so fuller nodes first.
CPU-only jobs score 0 everywhere. GPU choice: best fit. The arithmetic is compiled
(``placement.kernel.scores.gpuclustering_node``).
"""

from __future__ import annotations

from gpumosaic.placement.scorers.base import Scorer


class GpuClusteringScorer(Scorer):
    name = "gpuclustering"
    kernel_kind = 4  # kernel.GPUCLUSTERING
