"""DotProd (Tetris): the node fullest in the dimensions the job needs wins.

Node vector (free CPU / 128000, free GPU milli / 8000), job vector (CPU / 128000,
requested GPU milli / 8000); score = trunc(100 * (1 - dot / 2)). No normalization.
GPU choice: best fit. The arithmetic is compiled (``placement.kernel.scores.dotprod_node``).
"""

from __future__ import annotations

from gpumosaic.placement.scorers.base import Scorer


class DotProdScorer(Scorer):
    name = "dotprod"
    kernel_kind = 3  # kernel.DOTPROD
