"""The lease book's one-pass round (``kernel.start_singles``) against its general path:
the same leases extended, released and placed, the same counters and the same state."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpumosaic.mechanisms.rounds.leases import LeaseBook
from gpumosaic.model import ClusterSpec, ClusterState, JobSpec, NodeSpec, gpu_model
from gpumosaic.placement.registry import build_placement

TYPES = ("V100", "K80", "P100")


def cluster() -> ClusterState:
    nodes = [NodeSpec(f"v{i}", gpu_model("V100"), 1, 4000, 1000) for i in range(6)]
    nodes += [NodeSpec(f"k{i}", gpu_model("K80"), 1, 4000, 1000) for i in range(4)]
    nodes += [NodeSpec(f"p{i}", gpu_model("P100"), 2, 4000, 1000) for i in range(2)]
    return ClusterState(ClusterSpec(tuple(nodes)))


def book(placement: str, one_pass: bool) -> LeaseBook:
    state = cluster()
    names = tuple(m.name for m in state.spec.gpu_models)
    leases = LeaseBook(
        state, build_placement(placement, None), names, np.random.default_rng(5), True
    )
    leases.one_pass = one_pass
    return leases


def snapshot(leases: LeaseBook, n_rows: int) -> tuple[object, ...]:
    state = leases.state
    return (
        state.gpu_free.tolist(),
        state.gpu_tasks.tolist(),
        state.cpu_free.tolist(),
        state.memory_free.tolist(),
        state.kind_count.tolist(),
        state.node_version.tolist(),
        state.allocated_gpu_milli,
        state.releases,
        sorted((h, state.parts_of(h)) for h in state.holder_ids()),
        leases._held_type[:n_rows].tolist(),
        leases._held_gang[:n_rows].tolist(),
        leases.counts(),
        leases.placements,
        leases.fast_placements,
    )


def assert_held_list(leases: LeaseBook) -> None:
    """The one pass's list of held rows, when known, is the rows holding a lease; its
    scratch flags are all down."""
    known = int(leases._held_known[0])
    held = np.flatnonzero(leases._held_type >= 0).tolist()
    if known >= 0:
        assert sorted(leases._held_list[:known].tolist()) == held
    assert not leases._keep.any()


JOB = st.tuples(
    st.sampled_from([1, 1, 1, 2]),  # GPUs (2: a gang on the one-GPU servers)
    st.sampled_from([1000, 1000, 500]),  # milli per GPU
    st.sampled_from([0, 1500, 3000]),  # CPU
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(JOB, min_size=1, max_size=14),
    st.lists(
        st.tuples(st.lists(st.integers(0, 13), unique=True), st.lists(st.integers(0, 2))),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from(["strided", "bestfit", "random"]),
)
@pytest.mark.slow
def test_one_pass_round_is_the_general_path(
    shapes: list[tuple[int, int, int]],
    rounds: list[tuple[list[int], list[int]]],
    placement: str,
) -> None:
    specs = [
        JobSpec(i, 0.0, "j", k, milli if k == 1 else 1000, 100.0, cpu, 100, may_span_nodes=True)
        for i, (k, milli, cpu) in enumerate(shapes)
    ]
    n_rows = len(specs)
    books = [book(placement, True), book(placement, False)]
    order = {name: i for i, name in enumerate(books[0].state.model_names)}
    active = np.ones(n_rows, dtype=bool)
    for rows, types in rounds:
        rows = [r for r in rows if r < n_rows]
        ty = [order[TYPES[types[i % len(types)]]] if types else 0 for i in range(len(rows))]
        rows_a = np.array(rows, dtype=np.int64)
        rows_b = np.full(len(rows), -1, dtype=np.int64)
        type_index = np.array(ty, dtype=np.int64)
        out = [b.start_round(rows_a, rows_b, type_index, specs, active) for b in books]
        assert out[0][0].tolist() == out[1][0].tolist()
        assert out[0][1].tolist() == out[1][1].tolist()
        assert snapshot(books[0], n_rows) == snapshot(books[1], n_rows)
        books[0].state.check_invariants()
        assert_held_list(books[0])
        active[rows[:1]] = False  # a job that finished still holds its lease
    assert books[1].one_pass_rounds == 0


def test_one_pass_takes_the_common_round() -> None:
    """Single one-GPU jobs on identical one-GPU servers: every round is one pass."""
    specs = [JobSpec(i, 0.0, "j", 1, 1000, 100.0, 100, 10) for i in range(8)]
    leases = book("strided", True)
    v100 = leases.state.model_names.index("V100")
    k80 = leases.state.model_names.index("K80")
    active = np.ones(8, dtype=bool)
    none = np.full(5, -1, dtype=np.int64)
    first = leases.start_round(np.arange(5), none, np.full(5, v100), specs, active)
    assert first[0].tolist() == [0, 1, 2, 3, 4] and not first[1].any()
    rows = np.array([4, 0, 5, 1, 6])
    types = np.array([v100, v100, k80, k80, k80])
    placed, extended = leases.start_round(rows, none, types, specs, active)
    assert placed.tolist() == [0, 1, 2, 3, 4]
    assert extended.tolist() == [True, True, False, False, False]
    assert leases.one_pass_rounds == 2
    assert leases.counts().extensions == 2 and leases.counts().opportunities == 5
    assert sorted(leases.state.holder_ids()) == [0, 1, 4, 5, 6]
    assert leases.state.releases == 3  # rows 2, 3 released; row 1 moved to a K80
    assert leases._held_known[0] == 5
    assert_held_list(leases)
    leases.state.check_invariants()
