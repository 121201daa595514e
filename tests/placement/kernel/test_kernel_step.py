"""The compiled per-job step (placement/kernel/step.py) against plain formulations.

- the decision (``kernel.decide``: first best position; weighted sum of min-max
  normalized members) equals the numpy formulation it replaced, ties included;
- a run placed in one kernel call (``place_many``) equals a loop of place + allocate,
  decisions and every array of the state, for every scored strategy;
- Random's compiled filter and picks around numpy's draws give the decisions of the
  plain numpy formulation with the same Generator.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from placement_builders import cluster, job, workload

from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement import kernel
from gpumosaic.placement.batch import place_many
from gpumosaic.placement.filter import feasible_nodes
from gpumosaic.placement.registry import build_placement
from gpumosaic.placement.scorers import RandomPlacement

WL = workload(
    (1, 500, 2_000, 0.37), (1, 330, 4_000, 0.29), (2, 1000, 8_000, 0.21), (0, 0, 1_000, 0.13)
)
NODES = [("T4", 2, 32_000), ("V100", 4, 64_000), ("T4", 2, 32_000), ("A100", 8, 96_000)] * 3
SPECS = [
    "fgd", "fgd-exact", "worstfit", "bestfit", "dotprod", "gpuclustering", "gpupacking", "pwr",
    "firstfit", "pwr=200,fgd=800", "bestfit=300,gpupacking=700",
]  # fmt: skip


def _numpy_decision(raw: np.ndarray, weights: np.ndarray, all_equal: np.ndarray) -> int:
    """The numpy formulation the kernel replaced: one plain member decides by its own
    first maximum; otherwise sum weight * min-max(raw over the feasible nodes)."""
    if len(raw) == 1 and np.isnan(all_equal[0]):
        pos = int(np.argmax(raw[0]))
        return pos if raw[0, pos] > -np.inf else -1
    if np.isnan(all_equal).all():
        total = weights[0] * raw[0]
        for w, r in zip(weights[1:], raw[1:], strict=True):
            total = total + w * r
        pos = int(np.argmax(total))
        return pos if total[pos] > -np.inf else -1
    feasible = np.flatnonzero(raw[0] > -np.inf)
    if not len(feasible):
        return -1
    total = np.zeros(len(feasible))
    for w, r, equal in zip(weights, raw, all_equal, strict=True):
        part = r[feasible]
        if not np.isnan(equal):
            lo, hi = part.min(), part.max()
            part = (
                np.full_like(part, equal) if hi == lo else np.floor((part - lo) * 100 / (hi - lo))
            )
        total += w * part
    return int(feasible[np.argmax(total)])


@given(
    members=st.lists(
        st.tuples(
            st.sampled_from([1000.0, 800.0, 200.0, 0.5]), st.sampled_from([None, 0.0, 100.0])
        ),
        min_size=1,
        max_size=3,
    ),
    columns=st.lists(
        st.tuples(st.booleans(), st.lists(st.integers(-400, 100), min_size=3, max_size=3)),
        min_size=1,
        max_size=40,
    ),
    scale=st.sampled_from([1.0, 0.37, 1e-3]),
)
@pytest.mark.slow  # the kernel against numpy, many cases: seconds of CPU
@settings(max_examples=300, deadline=None)
def test_decision_equals_the_numpy_formulation(
    members: list[tuple[float, float | None]], columns: list[tuple[bool, list[int]]], scale: float
) -> None:
    m = len(members)
    raw = np.array([[v * scale for v in values[:m]] for _, values in columns]).T.copy()
    raw[:, [not feasible for feasible, _ in columns]] = -np.inf  # infeasible for every member
    weights = np.array([w for w, _ in members])
    all_equal = np.array([np.nan if e is None else e for _, e in members])
    n = raw.shape[1]
    got = kernel.decide(raw, weights, all_equal, np.empty(n, np.int64), np.empty(n), np.empty(n))
    assert got == _numpy_decision(raw, weights, all_equal)


def test_minmax_is_the_references_integer_normalization() -> None:
    vals = np.array([71.0, 78.0, 21.0, 5.0])
    kernel.minmax(vals, 3, 0.0)  # only the first 3: (71-21)*100//57 = 87, 100, 0
    assert vals.tolist() == [87, 100, 0, 5]
    same = np.array([-5.0, -5.0])
    kernel.minmax(same, 2, 100.0)
    assert same.tolist() == [100, 100]


def test_random_equals_the_numpy_formulation() -> None:
    shapes = [(1, 250, 1_000), (1, 500, 2_000), (1, 1000, 4_000), (2, 1000, 8_000), (0, 0, 3_000)]
    pick = np.random.default_rng(8)
    jobs = [job(*shapes[int(pick.integers(len(shapes)))]) for _ in range(150)]
    state, plain_state = cluster(*NODES), cluster(*NODES)
    strategy, rng, plain_rng = RandomPlacement(), np.random.default_rng(5), np.random.default_rng(5)
    placed = 0
    for j in jobs:
        got = strategy.choose(state, j, rng)
        nodes = np.flatnonzero(feasible_nodes(plain_state, j))
        want = None
        if len(nodes):
            node = int(nodes[plain_rng.integers(len(nodes))])
            free = plain_state.gpu_free[node]
            if j.is_fractional:
                fitting = np.flatnonzero(free >= j.gpu_milli)
                gpus: tuple[int, ...] = (int(fitting[plain_rng.integers(len(fitting))]),)
            else:
                gpus = tuple(int(g) for g in np.flatnonzero(free >= 1000)[: j.num_gpu])
            want = (node, gpus)
        assert got == want
        if got is not None:
            for s in (state, plain_state):
                s.allocate(Assignment(j.id, got[0], got[1], j.gpu_milli, j.cpu_milli, 0))
            placed += 1
    assert 30 < placed < len(jobs)  # the cluster filled up: failures were exercised too
    assert rng.integers(1 << 30) == plain_rng.integers(1 << 30)  # the same draws were made


SHAPES = [(1, 250, 1_000), (1, 500, 2_000), (1, 1000, 4_000), (2, 1000, 8_000), (0, 0, 3_000)]


def _arrays(state: ClusterState) -> list[np.ndarray]:
    return [
        state.gpu_free,
        state.gpu_tasks,
        state.cpu_free,
        state.memory_free,
        state.kind_count,
        state.node_version,
    ]


@given(
    spec=st.sampled_from(SPECS),
    rounds=st.lists(
        st.tuples(
            st.lists(st.tuples(st.integers(0, len(SHAPES) - 1), st.integers(1, 12)), max_size=6),
            st.floats(0.0, 0.8),  # share of held jobs released before the round
        ),
        min_size=1,
        max_size=4,
    ),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=60, deadline=None)
def test_batched_runs_equal_a_loop_of_place_and_allocate(
    spec: str, rounds: list[tuple[list[tuple[int, int]], float]], seed: int
) -> None:
    loop_state, batch_state = cluster(*NODES), cluster(*NODES)
    loop_strategy, batch_strategy = build_placement(spec, WL), build_placement(spec, WL)
    loop_rng, batch_rng = np.random.default_rng(seed), np.random.default_rng(seed)
    held: list[int] = []
    pick = np.random.default_rng(seed + 1)
    for runs, release in rounds:
        for job_id in [h for h in held if pick.random() < release]:
            loop_state.release(job_id)
            batch_state.release(job_id)
            held.remove(job_id)
        jobs = [job(*SHAPES[s]) for s, length in runs for _ in range(length)]
        looped = []
        for j in jobs:
            a = loop_strategy.place(loop_state, j, loop_rng)
            if a is not None:
                loop_state.allocate(a)
                looped.append(a)
        batch = place_many(batch_strategy, batch_state, jobs, batch_rng)
        assert list(batch.placed) == looped
        assert len(batch.placed) + len(batch.unplaced) == len(jobs)
        held += [a.job_id for a in looped]
        for x, y in zip(_arrays(loop_state), _arrays(batch_state), strict=True):
            assert np.array_equal(x, y)
        assert loop_state.allocated_gpu_milli == batch_state.allocated_gpu_milli
        batch_state.check_invariants()


@given(
    values=st.lists(
        st.sampled_from([-np.inf, -1.5, -0.0, 0.0, 2.0, 7.25]), min_size=1, max_size=40
    ),
    updates=st.lists(
        st.tuples(st.integers(0, 39), st.sampled_from([-np.inf, -0.0, 0.0, 2.0, 9.0])),
        max_size=30,
    ),
)
@settings(max_examples=200, deadline=None)
def test_the_tournament_keeps_the_first_maximum(
    values: list[float], updates: list[tuple[int, float]]
) -> None:
    """``tree_first_max`` is ``first_max`` (numpy's argmax, -1 when all are -inf) after a
    build and after every point update, ties and signed zeros included."""
    raw = np.array(values)
    leaves = 1 << max(len(raw) - 1, 0).bit_length()
    tree = np.full(2 * leaves, -np.inf)
    kernel.tree_build(raw, tree)
    assert kernel.tree_first_max(tree) == kernel.first_max(raw)
    for p, value in updates:
        p %= len(raw)
        raw[p] = value
        kernel.tree_set(tree, p, value)
        want = int(np.argmax(raw)) if (raw > -np.inf).any() else -1
        assert kernel.tree_first_max(tree) == kernel.first_max(raw) == want


@given(spec=st.sampled_from(SPECS), seed=st.integers(0, 2**16))
@settings(max_examples=40, deadline=None)
def test_a_shape_index_over_its_models_decides_as_over_every_node(spec: str, seed: int) -> None:
    """A shape's index holds only the nodes of its allowed models; its decisions are those
    of the numpy formulation over every node of the cluster in tie-break order."""
    state = cluster(*NODES)
    strategy = build_placement(spec, WL)
    rng = np.random.default_rng(seed)
    rank = strategy.node_order(state, rng)  # type: ignore[attr-defined]
    perm = np.argsort(rank)
    members = strategy.members  # type: ignore[attr-defined]
    weights = np.array([m.weight for m in members])
    all_equal = np.array(
        [np.nan if m.scorer.all_equal is None else m.scorer.all_equal for m in members]
    )
    pick = np.random.default_rng(seed + 1)
    models = ["T4", "V100|A100", "A100", None]
    decided = 0
    for _ in range(60):
        shape = SHAPES[int(pick.integers(len(SHAPES)))]
        j = job(*shape, models=models[int(pick.integers(len(models)))])
        got = strategy.choose(state, j, rng)
        feasible = feasible_nodes(state, j)[perm]
        raw = np.full((len(members), len(perm)), -np.inf)
        nodes = perm[feasible].astype(np.intp)
        for m, member in enumerate(members):
            raw[m, feasible] = member.scorer.raw_scores(state, j, nodes)
        pos = _numpy_decision(raw, weights, all_equal)
        assert (None if got is None else got[0]) == (None if pos < 0 else int(perm[pos]))
        if got is not None:
            state.allocate(Assignment(j.id, got[0], got[1], j.gpu_milli, j.cpu_milli, 0))
            decided += 1
    assert decided > 10
