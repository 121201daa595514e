"""FirstFit: the feasible node with the lowest index; the lowest-index GPU that fits.

raw = -(node index): unique per node, so the random tie-break never applies. Compiled
with the other scorers (``placement.kernel.scores.score_node``).
"""

from __future__ import annotations

from gpumosaic.placement.scorers.base import Scorer


class FirstFitScorer(Scorer):
    name = "firstfit"
    kernel_kind = 7  # kernel.FIRSTFIT
