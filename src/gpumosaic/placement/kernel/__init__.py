"""Compiled placement (numba): the one implementation of every scorer's arithmetic
(``scores``, FGD's in ``fgd``), of the min-max normalization and weighted sum, and of the
per-job step of a placement (``step``; Random's filter and picks: ``random``).

Every path that places (fill, event replay, rounds, the live extender, Gandiva's ranking)
runs these functions: ``ScoredPlacement`` calls ``place_run`` for one job (``choose``) or
for a run of same-shape jobs that it also allocates (``placement.batch.place_many``, the
round mechanism's lease book through ``ScoredPlacement.shape_run``),
``RandomPlacement`` calls ``random_feasible`` and ``random_node``, a scorer's
``raw_scores`` calls ``score_nodes``, and ``FragmentationTracker`` refreshes nodes with
``refresh_stale``. Import this package lazily (numba costs ~0.2 s of CPU to import and
~0.2 s to load the cached machine code on first call); it is compiled once per machine
into numba's cache, in a directory keyed by every kernel source (``gpumosaic.kernel_cache``:
numba alone would keep a kernel's old code after a kernel it calls in another file changed).

Same numbers as the numpy formulas they replace, bit for bit:

- F sums its per-class terms with numpy's pairwise summation (``pairwise_sum``), the
  order ``ndarray.sum`` uses on a contiguous row, so a node in the same state always gets
  the same F and FGD's Delta = 0 stays exact;
- the truncated FGD score ``trunc(100 * sigmoid(x))`` is read from the 100 thresholds of
  x where numpy's own ``1 / (1 + np.exp(-x)) * 100`` reaches each integer
  (``score_thresholds``): numpy's SIMD exp and the C library's exp differ in the last bit
  for ~2% of inputs, and a threshold table is exact for either. ``fgd-exact`` keeps the
  float, so its sigmoid is numpy's own, called from the kernel (``numpy_sigmoid``, in
  object mode: a few microseconds per re-scored node, paid by that variant only);
- the other scorers repeat, per node, the operations numpy applied to the same doubles
  (integer sums are exact in any order), and the weighted sum adds the members in the
  order numpy did, so their scores, totals and ties are the same bit for bit;
- Random's filter and picks are compiled, its two draws stay numpy's own
  ``rng.integers`` calls in Python (``scorers.random`` says why).
"""

from gpumosaic.placement.kernel.arithmetic import pairwise_sum, score_thresholds
from gpumosaic.placement.kernel.fgd import fgd_node, refresh_node, refresh_stale
from gpumosaic.placement.kernel.random import nth_fitting_gpu, random_feasible, random_node
from gpumosaic.placement.kernel.scores import (
    BESTFIT,
    DOTPROD,
    FGD,
    FGD_EXACT,
    FIRSTFIT,
    GPUCLUSTERING,
    GPUPACKING,
    PWR,
    WORSTFIT,
    best_fit_slot,
    minmax,
    score_many,
    score_node,
    score_nodes,
    weighted_total,
)
from gpumosaic.placement.kernel.step import decide, first_max, fits, fits_among, place_run
from gpumosaic.placement.kernel.tournament import tree_build, tree_first_max, tree_set

__all__ = [
    "BESTFIT",
    "DOTPROD",
    "FGD",
    "FGD_EXACT",
    "FIRSTFIT",
    "GPUCLUSTERING",
    "GPUPACKING",
    "PWR",
    "WORSTFIT",
    "best_fit_slot",
    "decide",
    "fgd_node",
    "first_max",
    "fits",
    "fits_among",
    "minmax",
    "nth_fitting_gpu",
    "pairwise_sum",
    "place_run",
    "random_feasible",
    "random_node",
    "refresh_node",
    "refresh_stale",
    "score_many",
    "score_node",
    "score_nodes",
    "score_thresholds",
    "tree_build",
    "tree_first_max",
    "tree_set",
    "weighted_total",
]
