"""Batch placement and the incremental per-shape index behind every scored strategy.

The index must give exactly the decision of the plain definition (filter every node,
score every feasible node, best total, ties by the run's node order) after any sequence
of allocations and releases; ``place_many`` must equal a loop of place + allocate;
``reconcile`` must leave continuing leases untouched.
"""

from __future__ import annotations

import numpy as np
import pytest
from placement_builders import cluster, job, workload

from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.base import PlacementStrategy
from gpumosaic.placement.batch import place_many, reconcile
from gpumosaic.placement.filter import feasible_nodes
from gpumosaic.placement.registry import build_placement
from gpumosaic.placement.scorers import ScoredPlacement

WL = workload((1, 500, 2_000, 0.5), (1, 1000, 4_000, 0.3), (2, 1000, 8_000, 0.2))
# Mixed models, sizes and CPU: few identical nodes, so ties and dedupe both get exercised.
NODES = [("T4", 2, 32_000), ("V100", 4, 64_000), ("T4", 2, 32_000), ("A100", 8, 96_000)] * 3
SHAPES = [(1, 250, 1_000), (1, 500, 2_000), (1, 1000, 4_000), (2, 1000, 8_000), (0, 0, 3_000)]
STRATEGIES = [
    "fgd",
    "fgd-exact",
    "worstfit",
    "bestfit",
    "pwr",
    "pwr=200,fgd=800",
    "gpupacking",
    "firstfit",
]


def random_jobs(rng: np.random.Generator, n: int) -> list[JobSpec]:
    return [job(*SHAPES[int(rng.integers(len(SHAPES)))]) for _ in range(n)]


def reference_node(strategy: ScoredPlacement, state: ClusterState, j: JobSpec) -> int | None:
    """The decision from its definition: no caches of feasibility or order."""
    nodes = np.flatnonzero(feasible_nodes(state, j))
    if not len(nodes):
        return None
    total = strategy.scores(state, j, nodes)
    best = nodes[total == total.max()]
    rank = strategy.node_order(state, np.random.default_rng(0))  # bound already
    return int(best[np.argmin(rank[best])])


@pytest.mark.parametrize("spec", STRATEGIES)
def test_index_matches_definition_through_allocations_and_releases(spec: str) -> None:
    state = cluster(*NODES)
    strategy = build_placement(spec, WL)
    assert isinstance(strategy, ScoredPlacement)
    rng = np.random.default_rng(3)
    strategy.bind(state, rng)
    held: list[int] = []
    for j in random_jobs(rng, 120):
        if held and rng.random() < 0.3:  # releases make nodes stale again
            state.release(held.pop(int(rng.integers(len(held)))))
        expected = reference_node(strategy, state, j)
        a = strategy.place(state, j, rng)
        assert (None if a is None else a.node) == expected
        if a is not None:
            state.allocate(a)
            held.append(a.job_id)
    state.check_invariants()


def loop_place(strategy: PlacementStrategy, state: ClusterState, jobs: list[JobSpec]) -> list:
    out = []
    rng = np.random.default_rng(11)
    for j in jobs:
        a = strategy.place(state, j, rng)
        if a is not None:
            state.allocate(a)
            out.append((a.job_id, a.node, a.gpus))
    return out


@pytest.mark.parametrize("spec", [*STRATEGIES, "random"])
def test_place_many_equals_a_loop(spec: str) -> None:
    jobs = random_jobs(np.random.default_rng(5), 200)  # far more than fits: many failures
    looped = loop_place(build_placement(spec, WL), cluster(*NODES), jobs)
    state = cluster(*NODES)
    batch = place_many(build_placement(spec, WL), state, jobs, np.random.default_rng(11))
    assert [(a.job_id, a.node, a.gpus) for a in batch.placed] == looped
    assert len(batch.placed) + len(batch.unplaced) == len(jobs)
    assert {a.job_id for a in batch.placed}.isdisjoint(j.id for j in batch.unplaced)
    state.check_invariants()


def test_place_many_strict_order_stops_at_first_failure() -> None:
    state = cluster(("T4", 2, 32_000))
    jobs = [job(1), job(2), job(1, 100)]  # the 2-GPU job cannot fit after the first
    batch = place_many(
        build_placement("bestfit", None),
        state,
        jobs,
        np.random.default_rng(0),
        stop_at_first_failure=True,
    )
    assert [a.job_id for a in batch.placed] == [jobs[0].id]
    assert [j.id for j in batch.unplaced] == [jobs[1].id, jobs[2].id]


def test_reconcile_keeps_continuing_leases_and_places_the_rest() -> None:
    state = cluster(*NODES)
    strategy = build_placement("fgd", WL)
    rng = np.random.default_rng(2)
    first = random_jobs(rng, 10)
    round1 = reconcile(strategy, state, first, rng)
    where = {a.job_id: (a.node, a.gpus) for a in round1.batch.placed}
    stay, leave = first[:6], first[6:]
    newcomers = random_jobs(rng, 4)
    round2 = reconcile(strategy, state, [*newcomers, *stay], rng, held=where)
    assert set(round2.kept) == {j.id for j in stay if j.id in where}
    assert {a.job_id for a in round2.released} == {j.id for j in leave if j.id in where}
    for job_id in round2.kept:  # untouched: same node and GPUs
        a = state.assignments[job_id]
        assert (a.node, a.gpus) == where[job_id]
    assert {a.job_id for a in round2.batch.placed} <= {j.id for j in newcomers}
    state.check_invariants()


def test_a_kept_shape_run_is_current_until_the_strategy_binds_another_state() -> None:
    """The round mechanism keeps a shape's compiled run (``shape_run``); a bind to another
    state starts new indexes, and ``current`` says the kept one is stale."""
    strategy = build_placement("worstfit", WL)
    assert isinstance(strategy, ScoredPlacement)
    state, other = cluster(*NODES), cluster(*NODES)
    rng = np.random.default_rng(0)
    shape = strategy.shape_run(state, job(1, 500, 2_000), rng)
    assert strategy.current(shape)
    assert strategy.shape_run(state, job(1, 500, 2_000), rng) is shape
    strategy.bind(other, rng)
    assert not strategy.current(shape)
    assert strategy.current(strategy.shape_run(other, job(1, 500, 2_000), rng))
