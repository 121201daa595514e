"""BestFit: least CPU and GPU left after placement wins.

raw = trunc(100 * (1 - [0.5 * (cpu free - cpu) / 128000 + 0.5 * (gpu free - gpu) / 8000])),
then the reference's integer min-max normalization over feasible nodes (all equal -> 0).
GPU choice: best fit. The arithmetic is compiled (``placement.kernel.scores.bestfit_node``).
"""

from __future__ import annotations

from gpumosaic.placement.scorers.base import Scorer


class BestFitScorer(Scorer):
    name = "bestfit"
    kernel_kind = 2  # kernel.BESTFIT
    all_equal = 0.0
