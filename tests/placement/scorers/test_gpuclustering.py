"""GpuClustering on a hand-made node set; the arithmetic of each score is in a comment."""

from __future__ import annotations

from placement_builders import all_nodes, cluster, job, occupy

from gpumosaic.placement.scorers import GpuClusteringScorer


def test_gpuclustering_bands() -> None:
    state = cluster(*[("T4", 4, 64_000)] * 4)
    occupy(state, 1, (0,), 300)  # n1: one sharing task
    occupy(state, 2, (0,), 300)  # n2: a sharing task and a 1-GPU task
    occupy(state, 2, (1,), 1000)
    occupy(state, 3, (1,), 1000)  # n3: a 1-GPU task only
    scorer = GpuClusteringScorer()
    # within-band bonus 25 * (8000 - free) // 8000:
    # n0 idle, free 4000 -> 25*4000//8000 = 12, band 25 -> 37
    # n1 only sharing, free 3700 -> 25*4300//8000 = 13, band 75 -> 88
    # n2 mixed incl. sharing, free 2700 -> 25*5300//8000 = 16, band 50 -> 66
    # n3 only other kinds, free 3000 -> 25*5000//8000 = 15, band 0 -> 15
    sharing = scorer.raw_scores(state, job(1, 500), all_nodes(state))
    assert sharing.tolist() == [37, 88, 66, 15]
    # a 1-GPU job: n1 only other kind -> 13; n2 mixed incl. 1-GPU -> 66; n3 only 1-GPU -> 90
    whole = scorer.raw_scores(state, job(1, 1000), all_nodes(state))
    assert whole.tolist() == [37, 13, 66, 75 + 15]
    assert scorer.raw_scores(state, job(0, cpu=1000), all_nodes(state)).tolist() == [0] * 4
