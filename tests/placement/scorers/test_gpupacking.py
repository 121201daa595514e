"""GpuPacking on a hand-made node set; the arithmetic of each score is in a comment."""

from __future__ import annotations

from placement_builders import all_nodes, cluster, job, occupy

from gpumosaic.placement.scorers import GpuPackingScorer


def test_gpupacking_cases() -> None:
    state = cluster(("T4", 4, 64_000), ("T4", 4, 64_000), ("T4", 4, 64_000), ("T4", 2, 64_000))
    occupy(state, 1, (0,), 300)  # n1: GPU 0 has 700 free
    occupy(state, 2, (0,), 600)  # n2: GPU 0 has 400 free (too little for 500)
    scorer = GpuPackingScorer()
    # fractional 500:
    # n0 idle 4 GPUs: case c, 33 - 4 = 29
    # n1 fits on the used GPU (700 free): case a, 100 - (700*100//1000)//10 = 100 - 7 = 93
    # n2 must take a fully free GPU on a used node: case b, 50 - 1 = 49
    # n3 idle 2 GPUs: case c, 33 - 2 = 31
    assert scorer.raw_scores(state, job(1, 500), all_nodes(state)).tolist() == [29, 93, 49, 31]
    # 2 whole GPUs: used nodes n1, n2 -> case b, 50 - 2 = 48; idle nodes as above
    assert scorer.raw_scores(state, job(2), all_nodes(state)).tolist() == [29, 48, 48, 31]
    assert scorer.raw_scores(state, job(0, cpu=1), all_nodes(state)).tolist() == [0] * 4
