"""FirstFit on a hand-made node set: the score is -(node index)."""

from __future__ import annotations

from placement_builders import all_nodes, cluster, job, occupy

from gpumosaic.placement.scorers import FirstFitScorer


def test_firstfit_scores_the_node_index() -> None:
    state = cluster(("V100", 1, 16_000), ("V100", 1, 16_000), ("V100", 1, 16_000))
    occupy(state, 0, (0,), 700)
    # -index whatever the state: n0 (-0.0), n1, n2
    assert FirstFitScorer().raw_scores(state, job(1, 200), all_nodes(state)).tolist() == [0, -1, -2]
