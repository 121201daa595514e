"""A named placement strategy orders the servers within Gandiva's affinity tier."""

from __future__ import annotations

import numpy as np
import pytest
from gandiva_builders import constant_workload, job, run_named, v100s

from gpumosaic.mechanisms.gandiva.affinity import Choice, ChoiceKind, ServerView, choose_server
from gpumosaic.mechanisms.gandiva.ranking import TierRanker, as_group_job
from gpumosaic.model import ClusterSpec, JobSpec
from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement.registry import build_placement

S = ServerView


def three_servers() -> tuple[ClusterState, list[ServerView]]:
    """Three 4-GPU V100 servers (64 CPUs each, never allocated by Gandiva): node 0 holds
    one 1-GPU set (3 free), node 1 three (1 free), node 2 is empty."""
    state = ClusterState(v100s(3, 4))
    state.allocate(Assignment(-1, 0, (0,), 1000, 0, 0))
    for gid, gpu in ((1, 0), (2, 1), (3, 2)):
        state.allocate(Assignment(-(gid + 1), 1, (gpu,), 1000, 0, 0))
    views = [S(0, 1, 4, 3, 0.25), S(1, 1, 4, 1, 0.75), S(2, 0, 4, 4, 0.0)]
    return state, views


def choose(placement: str | None, state: ClusterState, views: list[ServerView]) -> Choice | None:
    one_gpu = job(9, 10.0)
    rank = None
    if placement is not None:
        strategy = build_placement(placement, None)
        rank = TierRanker(strategy, state, np.random.default_rng(0)).rank(one_gpu, 1)
    return choose_server(views, 1, oversubscribe=True, max_share=4, rank=rank)


def test_gandiva_order_takes_the_least_loaded_same_affinity_server() -> None:
    state, views = three_servers()
    assert choose(None, state, views) == Choice(ChoiceKind.SAME_AFFINITY, 0)


def test_bestfit_takes_the_fullest_server_of_the_tier() -> None:
    # BestFit raw = trunc(100 * (1 - [0.5 * cpu_free / 128000 + 0.5 * (gpu_free - 1000) / 8000]))
    # (the job asks for no CPU). cpu term = 0.5 * 64000 / 128000 = 0.25 on both nodes.
    #   node 0: gpu term 0.5 * 2000 / 8000 = 0.125 -> trunc(62.5) = 62 -> min-max 0
    #   node 1: gpu term 0.5 *    0 / 8000 = 0     -> trunc(75.0) = 75 -> min-max 100
    # Node 1 wins, although Gandiva's own order (least loaded) takes node 0.
    state, views = three_servers()
    assert choose("bestfit", state, views) == Choice(ChoiceKind.SAME_AFFINITY, 1)


def test_the_affinity_tier_comes_before_the_strategy() -> None:
    # Strided (worst-fit) raw = gpu_left * 64001 + cpu_left: the empty node 2 (3000 left)
    # would beat node 0 (2000) and node 1 (0), but an empty server is only the second
    # tier: node 0, the best of the same-affinity tier, is chosen.
    state, views = three_servers()
    assert choose("strided", state, views) == Choice(ChoiceKind.SAME_AFFINITY, 0)
    # Without the same-affinity servers, the empty one is the only candidate.
    assert choose("bestfit", state, views[2:]) == Choice(ChoiceKind.UNASSIGNED, 2)


def test_equal_scores_keep_the_given_server_order() -> None:
    # Two identical candidates: BestFit's min-max of equal raw scores is 0 for both, so the
    # first one listed (the simulator's seeded order) wins, whichever it is.
    state = ClusterState(v100s(2, 4))
    for order in ([0, 1], [1, 0]):
        views = [S(n, 0, 4, 4, 0.0) for n in order]
        assert choose("bestfit", state, views) == Choice(ChoiceKind.UNASSIGNED, order[0])


def test_random_draws_one_candidate_of_the_tier() -> None:
    state, views = three_servers()
    picked = set()
    for seed in range(20):
        ranker = TierRanker(build_placement("random", None), state, np.random.default_rng(seed))
        choice = choose_server(
            views, 1, oversubscribe=True, max_share=4, rank=ranker.rank(job(9, 1.0), 1)
        )
        assert choice is not None and choice.kind is ChoiceKind.SAME_AFFINITY
        picked.add(choice.node)
    assert picked == {0, 1}  # never the empty node 2


def test_the_group_job_is_whole_gpus_and_nothing_else() -> None:
    fractional = JobSpec(1, 0.0, "x", num_gpu=1, gpu_milli=300, work=10.0, cpu_milli=4000)
    shaped = as_group_job(fractional, 1)
    assert (shaped.num_gpu, shaped.gpu_milli, shaped.cpu_milli, shaped.memory_mib) == (
        1,
        1000,
        0,
        0,
    )


@pytest.mark.parametrize(("placement", "model"), [("bestfit", "K80"), ("strided", "V100")])
def test_a_named_placement_picks_the_server_in_a_run(placement: str, model: str) -> None:
    # An empty 4-GPU V100 server and an empty 2-GPU K80 server (same speed here): BestFit
    # leaves the least free, the K80 server; strided leaves the most, the V100 server.
    cluster = ClusterSpec.from_counts([("v100", 4), ("k80", 2)], gpus_per_node=4)
    for seed in range(4):  # whatever the seeded server order
        result = run_named(
            cluster,
            constant_workload([job(0, 50.0)]),
            seed=seed,
            placement=placement,
            check_invariants=True,
        )
        assert [r.gpu_model for r in result.records] == [model]


def test_without_a_named_placement_the_seeded_order_decides() -> None:
    cluster = ClusterSpec.from_counts([("v100", 4), ("k80", 2)], gpus_per_node=4)
    models = {
        run_named(cluster, constant_workload([job(0, 50.0)]), seed=s).records[0].gpu_model
        for s in range(8)
    }
    assert models == {"V100", "K80"}  # both, depending on the seed: no size preference
