"""A weighted combination on a hand-made node set: the total is the weighted sum of the
members' normalized scores, the GPU choice that of the highest-weight member."""

from __future__ import annotations

import numpy as np
from placement_builders import all_nodes, cluster, job, occupy

from gpumosaic.placement.registry import build_placement
from gpumosaic.placement.scorers import ScoredPlacement


def test_weighted_sum_of_normalized_members() -> None:
    state = cluster(("T4", 2, 64_000), ("T4", 4, 16_000), ("T4", 8, 96_000))
    occupy(state, 2, (0,), 300)  # n2 free [700, 1000 x 7]
    strategy = build_placement("bestfit=300,dotprod=700", None)
    assert isinstance(strategy, ScoredPlacement)
    j = job(1, 500, cpu=8_000)
    # bestfit raw: n0 0.5*56000/128000 + 0.5*1500/8000 = 0.3125 -> 68
    #              n1 0.5*8000/128000 + 0.5*3500/8000 = 0.25 -> 75
    #              n2 0.5*88000/128000 + 0.5*7200/8000 = 0.79375 -> 20
    # min-max: (68-20)*100//55 = 87, 100, 0
    # dotprod (no normalization): n0 0.5*0.0625 + 0.25*0.0625 = 0.046875 -> 97
    #              n1 0.125*0.0625 + 0.5*0.0625 = 0.0390625 -> 98
    #              n2 0.75*0.0625 + 0.9625*0.0625 = 0.10703125 -> 94
    total = strategy.scores(state, j, all_nodes(state))
    assert total.tolist() == [300 * 87 + 700 * 97, 300 * 100 + 700 * 98, 300 * 0 + 700 * 94]
    choice = strategy.choose(state, j, np.random.default_rng(0))
    assert choice == (1, (0,))  # n1 has the highest total; dotprod's GPU rule: best fit


def test_untouched_nodes_of_one_capacity_share_a_class() -> None:
    from gpumosaic.placement.scorers.combined import _pristine_classes

    state = cluster(("T4", 2, 64_000), ("T4", 2, 64_000), ("V100", 2, 64_000), ("T4", 2, 64_000))
    occupy(state, 3, (0,), 300)  # n3 touched: scored on its own from now on
    kinds = np.array([2], dtype=np.int64)  # bestfit
    pristine, classes = _pristine_classes(state, kinds)
    assert pristine[0] == pristine[1] != pristine[2] and pristine[3] == -1 and classes == 2
    # first fit reads the node index: no node shares
    assert (_pristine_classes(state, np.array([7], dtype=np.int64))[0] == -1).all()
    # the decision is that of scoring every node (best total, then the run's node order)
    strategy = build_placement("bestfit", None)
    assert isinstance(strategy, ScoredPlacement)
    j = job(1, 500)
    choice = strategy.choose(state, j, np.random.default_rng(3))
    total = strategy.scores(state, j, all_nodes(state))
    best = np.flatnonzero(total == total.max())
    rank = strategy.node_order(state, np.random.default_rng(0))
    assert choice is not None and choice[0] == best[np.argmin(rank[best])]
