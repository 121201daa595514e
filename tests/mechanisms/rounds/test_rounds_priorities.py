"""Gavel's priorities and the greedy choice, on hand-checkable tables."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gpumosaic.mechanisms.rounds.priorities import (
    NEW_ENTITY_PRIORITY,
    EntityTable,
    _greedy,
    _greedy_fit,
    _ranked_fit,
    priorities,
    reset_accounting,
    select_entities,
)


def table(x, time, total, rows_b=None, demand=None, deficit=None, rows_a=None) -> EntityTable:
    x = np.asarray(x, dtype=np.float64)
    e, t = x.shape
    rows_b = np.full(e, -1) if rows_b is None else np.asarray(rows_b)
    return EntityTable(
        rows_a=np.arange(e) if rows_a is None else np.asarray(rows_a),
        rows_b=rows_b,
        x=x,
        time=np.asarray(time, dtype=np.float64),
        deficit=np.zeros((e, t)) if deficit is None else np.asarray(deficit, dtype=np.float64),
        rate_a=np.ones((e, t)),
        rate_b=np.where(rows_b[:, None] >= 0, 1.0, 0.0) * np.ones((e, t)),
        demand_milli=np.full(e, 1000) if demand is None else np.asarray(demand),
        type_total=np.asarray(total, dtype=np.float64),
    )


def test_priority_is_allocation_over_fraction_received():
    # fractions: 180/540 = 1/3 and 360/540 = 2/3 -> 0.5 / (1/3) = 1.5, 0.25 / (2/3) = 0.375
    tab = table([[0.5], [0.25], [0.0]], [[180.0], [360.0], [180.0]], [540.0])
    np.testing.assert_allclose(priorities(tab)[:, 0], [1.5, 0.375, 0.0])


def test_nothing_received_gives_allocation_times_1e9():
    tab = table([[0.5], [0.2]], [[0.0], [0.0]], [0.0])
    np.testing.assert_allclose(
        priorities(tab)[:, 0], [0.5 * NEW_ENTITY_PRIORITY, 0.2 * NEW_ENTITY_PRIORITY]
    )


def test_deficit_at_reset():
    # X 0.5 over 1000 s should give 500 s; it got 300 s (480 - the 180 s credit): +200.
    tab = table([[0.5]], [[480.0]], [480.0], deficit=[[10.0]])
    np.testing.assert_allclose(reset_accounting(tab, 1000.0, 180.0), [[210.0]])


def test_greedy_takes_highest_priority_that_fits():
    # One type, 2 GPUs: priorities 1.5, 0.375, 0.75 -> rows 0 and 2 run.
    tab = table([[0.5], [0.25], [0.5]], [[180.0], [360.0], [360.0]], [540.0])
    alive = np.ones(3, dtype=bool)
    chosen = select_entities(tab, alive, [0], [2000], skip_zero_priority=False)
    assert chosen == [(0, 0), (2, 0)]


def test_ties_break_by_deficit_then_allocation_then_arrival():
    tab = table(
        [[0.5], [0.5], [0.5]],
        [[180.0]] * 3,
        [540.0],
        deficit=[[0.0], [5.0], [0.0]],
    )
    chosen = select_entities(tab, np.ones(3, bool), [0], [2000], skip_zero_priority=False)
    assert chosen == [(1, 0), (0, 0)]


def test_zero_priority_runs_on_leftover_gpus_except_fifo():
    tab = table([[1.0], [0.0]], [[180.0], [180.0]], [360.0])
    alive = np.ones(2, dtype=bool)
    assert select_entities(tab, alive, [0], [2000], False) == [(0, 0), (1, 0)]
    assert select_entities(tab, alive, [0], [2000], True) == [(0, 0)]


def test_fractional_demand_counts_milli_and_job_runs_once():
    # Two types; 500-milli jobs: type 0 holds 1000 milli -> two jobs; the third goes to type 1.
    tab = table(
        [[0.5, 0.5], [0.5, 0.5], [0.4, 0.5]],
        [[180.0, 180.0]] * 3,
        [540.0, 540.0],
        demand=[500, 500, 500],
    )
    chosen = select_entities(tab, np.ones(3, bool), [0, 1], [1000, 1000], False)
    assert chosen == [(0, 0), (1, 0), (2, 1)]


def test_pair_blocks_its_members_and_dead_entities_are_skipped():
    # Entity 2 is the pair (0, 1) with the top priority; singles 0 and 1 are then skipped.
    tab = table(
        [[0.2], [0.2], [0.9]],
        [[180.0]] * 3,
        [540.0],
        rows_b=[-1, -1, 1],
        rows_a=[0, 1, 0],
    )
    alive = np.ones(3, dtype=bool)
    assert select_entities(tab, alive, [0], [3000], False) == [(2, 0)]
    alive[2] = False
    assert select_entities(tab, alive, [0], [3000], False) == [(0, 0), (1, 0)]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([200, 300, 500, 700, 1000, 2000]), min_size=1, max_size=40),
    st.integers(min_value=0, max_value=12_000),
)
def test_vectorized_capacity_walk_takes_what_gavels_loop_takes(demand, left):
    d = np.asarray(demand, dtype=np.int64)
    n = len(d)
    tab = table(np.ones((n, 1)), np.zeros((n, 1)), [0.0], demand=d)
    loop = _greedy(list(range(n)), 0, left, tab.rows_a, tab.rows_b, tab, np.zeros(n, bool))
    assert _greedy_fit(d, left).tolist() == [e for e, _ in loop]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0]), st.sampled_from([100, 500, 1000])),
        min_size=1,
        max_size=300,
    ),
    st.integers(min_value=0, max_value=20_000),
)
def test_partial_ranking_picks_what_ranking_everyone_picks(queue, left):
    """``_ranked_fit`` sorts only the head of a long queue: same entities, same order as
    sorting all of them (many ties, so the head's cut falls inside a run of equal keys)."""
    key = np.array([k for k, _ in queue])
    demand = np.array([d for _, d in queue], dtype=np.int64)
    candidates = np.arange(len(queue))[::-1].copy()  # tie order: any permutation
    full = np.argsort(key, kind="stable")
    expected = candidates[full[_greedy_fit(demand[candidates][full], left)]]
    assert _ranked_fit(candidates, key, demand, left).tolist() == expected.tolist()
