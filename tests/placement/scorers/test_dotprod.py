"""DotProd on a hand-made node set; the arithmetic of each score is in a comment."""

from __future__ import annotations

from placement_builders import all_nodes, cluster, job

from gpumosaic.placement.scorers import DotProdScorer


def test_dotprod() -> None:
    state = cluster(("T4", 2, 64_000), ("T4", 4, 16_000))
    j = job(1, 500, cpu=8_000)
    # n0: dot = 64000/128000 * 8000/128000 + 2000/8000 * 500/8000 = 0.03125 + 0.015625
    #     = 0.046875; 100 * (1 - 0.046875 / 2) = 97.66 -> 97
    # n1: dot = 16000/128000 * 0.0625 + 4000/8000 * 0.0625 = 0.0078125 + 0.03125
    #     = 0.0390625; 100 * (1 - 0.01953125) = 98.05 -> 98 (emptier in GPU, but less CPU)
    assert DotProdScorer().raw_scores(state, j, all_nodes(state)).tolist() == [97, 98]
