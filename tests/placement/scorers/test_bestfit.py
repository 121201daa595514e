"""BestFit on a hand-made node set; the arithmetic of each score is in a comment."""

from __future__ import annotations

import numpy as np
from placement_builders import all_nodes, cluster, job

from gpumosaic.placement.scorers import BestFitScorer


def test_bestfit_raw_and_normalized() -> None:
    state = cluster(("T4", 2, 64_000), ("T4", 4, 16_000), ("T4", 8, 96_000))
    j = job(1, 1000, cpu=8_000)
    scorer = BestFitScorer()
    # n0: 0.5*(64000-8000)/128000 + 0.5*(2000-1000)/8000 = 0.21875 + 0.0625 = 0.28125
    #     -> 100 * (1 - 0.28125) = 71.875 -> 71
    # n1: 0.5*8000/128000 + 0.5*3000/8000 = 0.03125 + 0.1875 = 0.21875 -> 78.125 -> 78
    # n2: 0.5*88000/128000 + 0.5*7000/8000 = 0.34375 + 0.4375 = 0.78125 -> 21.875 -> 21
    raw = scorer.raw_scores(state, j, all_nodes(state))
    assert raw.tolist() == [71, 78, 21]
    # min-max: (71-21)*100//57 = 87, (78-21)*100//57 = 100, 0
    assert scorer.normalize(raw).tolist() == [87, 100, 0]
    assert scorer.normalize(np.array([5.0, 5.0])).tolist() == [0, 0]
