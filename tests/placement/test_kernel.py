"""The compiled placement steps (placement/kernel.py) against the plain formulas.

- ``pairwise_sum`` is numpy's own summation order, bit for bit (FGD's Delta = 0 relies
  on it);
- the truncated FGD score read from the threshold table equals numpy's
  ``trunc(1 / (1 + exp(-x)) * 100)`` everywhere, including both sides of each threshold;
- FGD's kernel score of every candidate equals the definition computed from scratch with
  ``node_fragmentation`` on a copy of the cluster after the hypothetical placement;
- a run placed in one kernel call (``place_many``) equals a loop of place + allocate,
  decisions and every array of the state.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from placement_builders import all_nodes, cluster, job, occupy, workload

from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement import kernel
from gpumosaic.placement.batch import place_many
from gpumosaic.placement.fragmentation import node_fragmentation
from gpumosaic.placement.registry import build_placement
from gpumosaic.placement.scorers import FgdScorer

WL = workload(
    (1, 500, 2_000, 0.37), (1, 330, 4_000, 0.29), (2, 1000, 8_000, 0.21), (0, 0, 1_000, 0.13)
)
NODES = [("T4", 2, 32_000), ("V100", 4, 64_000), ("T4", 2, 32_000), ("A100", 8, 96_000)] * 3


@given(
    st.lists(
        st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False),
        max_size=400,
    )
)
@settings(max_examples=200, deadline=None)
def test_pairwise_sum_is_numpys_sum(values: list[float]) -> None:
    a = np.array(values, dtype=np.float64)
    assert kernel.pairwise_sum(a, 0, len(a)) == a.sum()


def test_pairwise_sum_orders_like_numpy_where_order_matters() -> None:
    # Sums whose value depends on the order (mixed magnitudes), every length to 1,100.
    rng = np.random.default_rng(4)
    for n in range(1_100):
        a = rng.random(n) * 10.0 ** rng.integers(-8, 9, n)
        assert kernel.pairwise_sum(a, 0, n) == a.sum()
        assert kernel.pairwise_sum(a, 3, max(n - 5, 0)) == a[3 : 3 + max(n - 5, 0)].sum()


def test_score_thresholds_give_numpys_truncated_sigmoid() -> None:
    thresholds = kernel.score_thresholds()
    assert len(thresholds) == 100 and (np.diff(thresholds) > 0).all()
    rng = np.random.default_rng(1)
    x = np.concatenate(
        [
            rng.uniform(-40, 40, 500_000),
            rng.normal(0, 0.2, 500_000),
            np.round(rng.uniform(-8, 8, 200_000), 3),  # Delta in whole milli / 1000
            thresholds,
            np.nextafter(thresholds, -np.inf),
            np.nextafter(thresholds, np.inf),
            [0.0, -0.0, -1e-300, 1e-300],
        ]
    )
    with np.errstate(over="ignore"):
        plain = np.trunc(1.0 / (1.0 + np.exp(-x)) * 100)
    assert np.array_equal(np.searchsorted(thresholds, x, side="right"), plain)
    assert np.searchsorted(thresholds, 0.0, side="right") == 50  # Delta = 0 -> 50


def _definition_scores(state: ClusterState, j, exact: bool) -> np.ndarray:
    """FGD's score of every candidate from scratch: F of the node after the placement
    minus F before, with the reference measure (no tracker, no tables)."""
    before = node_fragmentation(state, WL)
    out = np.full((state.num_nodes, state.gpu_free.shape[1] if j.is_fractional else 1), -np.inf)
    for n in range(state.num_nodes):
        free = state.gpu_free[n]
        if j.is_fractional:
            candidates = [(g,) for g in range(len(free)) if free[g] >= j.gpu_milli]
        else:
            whole = [g for g in range(len(free)) if free[g] >= 1000][: j.num_gpu]
            candidates = [tuple(whole)] if len(whole) == j.num_gpu else []
        for gpus in candidates:
            after_state = copy.deepcopy(state)
            after_state.allocate(
                Assignment(-1, n, gpus, j.gpu_milli if j.num_gpu else 0, j.cpu_milli, 0)
            )
            delta = node_fragmentation(after_state, WL)[n] - before[n]
            score = 100 / (1 + np.exp(delta / 1000))
            out[n, gpus[0] if j.is_fractional else 0] = score if exact else np.trunc(score)
    return out


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize(
    "shape", [(1, 250, 1_000), (1, 500, 2_000), (1, 1000, 4_000), (2, 1000, 8_000), (0, 0, 3_000)]
)
def test_fgd_kernel_scores_equal_the_definition(shape: tuple[int, int, int], exact: bool) -> None:
    state = cluster(("T4", 2, 32_000), ("V100", 4, 64_000), ("A100", 8, 96_000))
    occupy(state, 0, (0,), 700, cpu=2_000)
    occupy(state, 1, (1,), 330, cpu=8_000)
    occupy(state, 1, (2,), 500)
    occupy(state, 2, (0, 1, 2), 1000, cpu=30_000)
    occupy(state, 2, (5,), 170)
    j = job(*shape)
    scorer = FgdScorer(WL, exact=exact)
    got = scorer.candidate_scores(state, j, all_nodes(state))
    want = _definition_scores(state, j, exact)
    fits = np.isfinite(want)  # nodes that cannot hold a whole-GPU job are never scored
    if j.is_fractional:  # -inf exactly on the GPUs that do not fit
        assert np.array_equal(np.isfinite(got), fits)
    if exact:
        np.testing.assert_allclose(got[fits], want[fits], rtol=1e-12)
    else:
        assert np.array_equal(got[fits], want[fits])


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
    spec=st.sampled_from(["fgd", "fgd-exact", "worstfit"]),
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
@settings(max_examples=40, deadline=None)
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
