"""ClusterState's bulk bookkeeping (allocate_many, release_many, their gang forms) against
the same assignments applied one by one."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpumosaic.errors import BookkeepingError
from gpumosaic.model import Assignment, ClusterSpec, ClusterState, NodeSpec, gpu_model


def small_cluster() -> ClusterState:
    spec = ClusterSpec(
        (
            NodeSpec("a", gpu_model("V100"), 4, 16000, 4000),
            NodeSpec("b", gpu_model("T4"), 2, 8000, 2000),
            NodeSpec("c", gpu_model("V100"), 1, 4000, 1000),
        )
    )
    return ClusterState(spec)


def arrays(state: ClusterState) -> tuple[list[object], ...]:
    return (
        state.gpu_free.tolist(),
        state.gpu_tasks.tolist(),
        state.cpu_free.tolist(),
        state.memory_free.tolist(),
        state.kind_count.tolist(),
        state.node_version.tolist(),
        [state.allocated_gpu_milli, state.releases],
        sorted((h, state.parts_of(h)) for h in state.holder_ids()),
    )


@st.composite
def fitting_assignments(draw: st.DrawFn) -> list[Assignment]:
    """Assignments (whole GPUs or one fractional share, with CPU and memory) that fit the
    cluster together, chosen greedily from random wishes."""
    state = small_cluster()
    out: list[Assignment] = []
    for job_id in range(draw(st.integers(0, 14))):
        node = draw(st.integers(0, state.num_nodes - 1))
        whole = draw(st.booleans())
        free = state.gpu_free[node]
        if whole:
            count = draw(st.integers(0, int(state.num_gpus[node])))
            slots = tuple(int(g) for g in np.flatnonzero(free == 1000)[:count])
            milli = 1000
        else:
            milli = draw(st.integers(1, 999))
            fits = np.flatnonzero(free >= milli)
            slots = (int(fits[0]),) if len(fits) else ()
        cpu = draw(st.integers(0, 3000))
        memory = draw(st.integers(0, 800))
        a = Assignment(job_id, node, slots, milli, cpu, memory)
        try:
            state.allocate(a)
        except BookkeepingError:
            continue
        out.append(a)
    return out


@settings(max_examples=60, deadline=None)
@given(fitting_assignments(), st.data())
def test_release_many_is_sequential_release(assignments: list[Assignment], data: st.DataObject):
    one, bulk = small_cluster(), small_cluster()
    for a in assignments:
        one.allocate(a)
    bulk.allocate_many(assignments)
    assert arrays(one) == arrays(bulk)  # allocate_many is allocate one by one
    ids = [a.job_id for a in assignments]
    gone = data.draw(st.lists(st.sampled_from(ids), unique=True) if ids else st.just([]))
    for job_id in gone:
        one.release(job_id)
    bulk.release_many(gone)
    assert arrays(one) == arrays(bulk)
    bulk.check_invariants()


def test_allocate_many_is_all_or_nothing() -> None:
    state = small_cluster()
    before = arrays(state)
    over = [Assignment(1, 0, (0,), 600, 0, 0), Assignment(2, 0, (0,), 600, 0, 0)]
    with pytest.raises(BookkeepingError, match="over 1000 milli"):
        state.allocate_many(over)
    assert arrays(state)[:5] == before[:5] and not state.assignments
    with pytest.raises(BookkeepingError, match="slot its node lacks"):
        state.allocate_many([Assignment(1, 2, (1,), 1000, 0, 0)])
    with pytest.raises(BookkeepingError, match="CPU or memory"):
        state.allocate_many([Assignment(1, 2, (0,), 1000, 5000, 0)])
    with pytest.raises(BookkeepingError, match="listed twice"):
        state.allocate_many([Assignment(1, 0, (0,), 10, 0, 0), Assignment(1, 1, (0,), 10, 0, 0)])
    state.check_invariants()


def test_release_many_of_a_job_not_held_is_refused() -> None:
    state = small_cluster()
    state.allocate(Assignment(1, 0, (0,), 1000, 0, 0))
    with pytest.raises(BookkeepingError, match="holds nothing"):
        state.release_many([1, 2])


def test_gangs_in_bulk_are_gangs_one_by_one() -> None:
    one, bulk = small_cluster(), small_cluster()
    gangs = [
        (Assignment(5, 0, (0, 1), 1000, 100, 10), Assignment(5, 2, (0,), 1000, 50, 5)),
        (Assignment(6, 1, (0,), 1000, 0, 0), Assignment(6, 0, (2,), 1000, 0, 0)),
    ]
    for parts in gangs:
        one.allocate_gang(parts)
    bulk.allocate_gangs(gangs)
    assert arrays(one) == arrays(bulk)
    one.release_gang(6)
    one.release_gang(5)
    bulk.release_gangs([6, 5])
    assert arrays(one) == arrays(bulk)
    bulk.check_invariants()
    with pytest.raises(BookkeepingError, match="one per node"):
        bulk.allocate_gangs(
            [(Assignment(7, 0, (0,), 1000, 0, 0), Assignment(7, 0, (1,), 1000, 0, 0))]
        )


@pytest.mark.slow  # hypothesis examples of bulk assignments: seconds of CPU
@settings(max_examples=40, deadline=None)
@given(fitting_assignments(), st.data())
def test_rows_are_assignments_kept_as_arrays(assignments: list[Assignment], data: st.DataObject):
    """Jobs allocated from arrays (kept as rows) leave the state as allocate does, read back
    as the same assignments, and release (in bulk or one by one) as assignments do."""
    one, bulk = small_cluster(), small_cluster()
    for a in assignments:
        one.allocate(a)
    by_count: dict[int, list[Assignment]] = {}
    for a in assignments:
        by_count.setdefault(len(a.gpus), []).append(a)
    for k, group in by_count.items():
        bulk.allocate_rows(
            np.array([a.job_id for a in group]),
            np.array([a.node for a in group]),
            np.array([a.gpus for a in group], dtype=np.int64).reshape(len(group), k),
            np.array([a.gpu_milli for a in group]),
            np.array([a.cpu_milli for a in group]),
            np.array([a.memory_mib for a in group]),
        )
    assert arrays(one)[:-1] == arrays(bulk)[:-1]
    assert sorted(bulk.holder_ids()) == sorted(one.assignments)
    assert all(bulk.parts_of(a.job_id) == (a,) for a in assignments)
    ids = [a.job_id for a in assignments]
    gone = data.draw(st.lists(st.sampled_from(ids), unique=True) if ids else st.just([]))
    for job_id in gone:
        one.release(job_id)
    if gone:
        assert bulk.release(gone[0]) == one_part(assignments, gone[0])
    bulk.release_many(gone[1:])
    assert arrays(one) == arrays(bulk)
    bulk.check_invariants()
    if gone:
        with pytest.raises(BookkeepingError):
            bulk.release_many(gone[:1])  # no longer held


def one_part(assignments: list[Assignment], job_id: int) -> Assignment:
    return next(a for a in assignments if a.job_id == job_id)


def test_allocate_rows_refuses_a_job_held_as_an_assignment() -> None:
    state = small_cluster()
    state.allocate(Assignment(3, 0, (0,), 500, 0, 0))
    before = arrays(state)
    with pytest.raises(BookkeepingError, match="already placed"):
        state.allocate_rows(np.array([3]), np.array([1]), np.array([[0]]), 1000, 0, 0)
    assert arrays(state)[:5] == before[:5]
    state.allocate_rows(np.array([4]), np.array([1]), np.array([[1]]), 100, 0, 0)
    with pytest.raises(BookkeepingError, match="already placed"):
        state.allocate(Assignment(4, 1, (0,), 100, 0, 0))


def test_rows_listed_twice_are_refused_and_nothing_changes() -> None:
    state = small_cluster()
    before = arrays(state)
    with pytest.raises(BookkeepingError, match="listed twice"):
        state.allocate_rows(np.array([1, 1]), np.array([0, 1]), np.array([[0], [0]]), 1000, 0, 0)
    assert arrays(state)[:4] == before[:4] and not state.holder_ids()
    state.allocate_rows(np.array([1, 2]), np.array([0, 1]), np.array([[0], [0]]), 1000, 0, 0)
    held = arrays(state)
    with pytest.raises(BookkeepingError, match="holds nothing"):
        state.release_many([1, 2, 1])
    assert arrays(state) == held
