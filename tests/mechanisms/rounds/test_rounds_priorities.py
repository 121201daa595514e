"""Gavel's priorities and the greedy choice, on hand-checkable tables."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpumosaic.mechanisms.rounds.choice_kernel import NEW_ENTITY_PRIORITY
from gpumosaic.mechanisms.rounds.priorities import (
    EntityTable,
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


def gavel_loop(
    tab: EntityTable,
    alive: np.ndarray,
    order: list[int],
    capacity: list[int],
    skip_zero: bool,
) -> list[tuple[int, int]]:
    """Gavel's ``_schedule_jobs_on_workers_helper`` written plainly: per type, sort the
    queue by (priority, deficit, allocation) descending with Python's stable sort over
    arrival order, then take every entity whose jobs are free and whose demand fits."""
    prio = priorities(tab)
    taken: set[int] = set()
    out = []
    for t in order:
        left = capacity[t]
        queue = [
            e
            for e in range(tab.size)
            if alive[e] and tab.runnable_mask[e, t] and not (skip_zero and prio[e, t] <= 0)
        ]
        # (Python's sort stays stable with reverse=True: equal keys keep arrival order.)
        queue.sort(key=lambda e: (prio[e, t], tab.deficit[e, t], tab.x[e, t]), reverse=True)
        for e in queue:
            members = {int(tab.rows_a[e])} | ({int(tab.rows_b[e])} if tab.rows_b[e] >= 0 else set())
            if members & taken or tab.demand_milli[e] > left or left <= 0:
                continue
            left -= int(tab.demand_milli[e])
            taken |= members
            out.append((e, t))
    return out


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 40).flatmap(
        lambda n: st.tuples(
            st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]), min_size=2 * n, max_size=2 * n),
            st.lists(st.sampled_from([0.0, 180.0, 360.0, 720.0]), min_size=2 * n, max_size=2 * n),
            st.lists(st.sampled_from([0.0, 5.0, -5.0]), min_size=2 * n, max_size=2 * n),
            st.lists(st.sampled_from([100, 250, 500, 1000, 2000]), min_size=n, max_size=n),
            st.lists(st.integers(-1, 9), min_size=n, max_size=n),
            st.lists(st.booleans(), min_size=n, max_size=n),
        )
    ),
    st.lists(st.integers(0, 6000), min_size=2, max_size=2),
    st.booleans(),
    st.booleans(),
)
def test_compiled_choice_takes_what_gavels_loop_takes(case, capacity, skip_zero, reverse):
    """Many ties (few distinct values), pairs sharing members, dead entities, fractional
    demands: the compiled heap walk picks Gavel's entities in Gavel's order."""
    x, time, deficit, demand, partner, alive = case
    n = len(demand)
    rows_a = np.arange(n) % 10
    rows_b = np.where(np.asarray(partner) == rows_a, -1, partner)
    tab = table(
        np.reshape(x, (n, 2)),
        np.reshape(time, (n, 2)),
        [1080.0, 0.0],
        rows_b=rows_b,
        demand=demand,
        deficit=np.reshape(deficit, (n, 2)),
        rows_a=rows_a,
    )
    alive_mask = np.asarray(alive, dtype=bool)
    order = [1, 0] if reverse else [0, 1]
    expected = gavel_loop(tab, alive_mask, order, capacity, skip_zero)
    assert select_entities(tab, alive_mask, order, capacity, skip_zero) == expected


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.sampled_from([0.0, -0.0, 1.5, -1.5, 2.0, -3e9, 1e-300, -1e-300, np.inf, -np.inf]),
        min_size=0,
        max_size=60,
    ),
    st.integers(0, 3000),
    st.integers(0, 2**32 - 1),
)
def test_stable_argsort_is_numpys_on_long_arrays_with_ties(values, n, seed):
    """The radix path (long arrays) and the merge-sort path (short ones) give numpy's
    stable order, ties (and -0.0 == 0.0) in input order."""
    from gpumosaic.mechanisms.rounds.choice_kernel import stable_argsort

    rng = np.random.default_rng(seed)
    pool = np.array(values or [1.0])
    keys = np.concatenate([pool[rng.integers(0, len(pool), n)], -rng.random(n // 3)])
    np.testing.assert_array_equal(stable_argsort(keys), np.argsort(keys, kind="stable"))


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 2500), st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_tie_orders_are_numpys_lexsort(n, types, seed):
    """Deficit descending, then allocation descending, then arrival, per type (few
    distinct values: many ties; zeros of both signs)."""
    from gpumosaic.mechanisms.rounds.choice_kernel import tie_orders

    rng = np.random.default_rng(seed)
    x = rng.choice([0.0, -0.0, 0.125, 0.25, 1 / 3], size=(n, types))
    deficit = rng.choice([0.0, -0.0, 5.0, -5.0, 1e-9], size=(n, types)) + np.where(
        rng.random((n, types)) < 0.5, rng.random((n, types)), 0.0
    )
    expected = np.stack([np.lexsort((-x[:, k], -deficit[:, k])) for k in range(types)])
    np.testing.assert_array_equal(tie_orders(x, deficit), expected)
