import pytest

from gpumosaic.errors import BookkeepingError
from gpumosaic.model import Assignment, ClusterSpec, ClusterState, NodeSpec, gpu_model


def two_nodes() -> ClusterState:
    spec = ClusterSpec(
        (
            NodeSpec("a", gpu_model("V100"), 2, 8000, 1000),
            NodeSpec("b", gpu_model("T4"), 1, 4000, 500),
        )
    )
    return ClusterState(spec)


def test_padding_slots_never_fit() -> None:
    state = two_nodes()
    assert state.gpu_free.tolist() == [[1000, 1000], [1000, 0]]
    assert state.gpu_exists.tolist() == [[True, True], [True, False]]
    assert state.total_gpu_milli == 3000


def test_allocate_and_release_restore_the_state() -> None:
    state = two_nodes()
    a = Assignment(7, 0, (1,), 300, 2000, 100)
    state.allocate(a)
    assert state.gpu_free[0].tolist() == [1000, 700]
    assert state.cpu_free[0] == 6000 and state.memory_free[0] == 900
    assert state.kind_count[0, 0] == 1  # a fractional ("sharing") task
    assert state.node_version[0] == 1
    state.check_invariants()
    assert state.release(7) == a
    assert state.gpu_free[0].tolist() == [1000, 1000]
    assert state.kind_count[0].sum() == 0
    state.check_invariants()


@pytest.mark.parametrize(
    "assignment, message",
    [
        (Assignment(1, 0, (0,), 1001, 0, 0), "over 1000"),
        (Assignment(1, 1, (1,), 100, 0, 0), "no GPU slot"),
        (Assignment(1, 0, (0,), 100, 9000, 0), "CPU or memory"),
        (Assignment(1, 1, (0,), 100, 0, 501), "CPU or memory"),
        (Assignment(1, 0, (0, 0), 100, 0, 0), "twice"),
    ],
)
def test_over_allocation_is_refused(assignment: Assignment, message: str) -> None:
    state = two_nodes()
    with pytest.raises(BookkeepingError, match=message):
        state.allocate(assignment)
    state.check_invariants()
    assert state.allocated_gpu_milli == 0


def test_gang_is_all_or_nothing() -> None:
    state = ClusterState(ClusterSpec.from_counts([("v100", 3)]))
    state.allocate(Assignment(1, 2, (0,), 600, 0, 0))
    with pytest.raises(BookkeepingError):
        state.allocate_gang((Assignment(2, 0, (0,), 500, 0, 0), Assignment(2, 2, (0,), 500, 0, 0)))
    assert state.gpu_free.ravel().tolist() == [1000, 1000, 400]
    state.allocate_gang((Assignment(3, 0, (0,), 1000, 0, 0), Assignment(3, 1, (0,), 1000, 0, 0)))
    assert state.holds(3)
    state.check_invariants()
    state.release_gang(3)
    assert state.gpu_free.ravel().tolist() == [1000, 1000, 400]


def test_fits_when_empty_checks_one_node_at_a_time() -> None:
    from gpumosaic.model.job import JobSpec

    state = two_nodes()
    fits = JobSpec(0, 0.0, "t", 2, 1000, 1.0, cpu_milli=8000)
    too_wide = JobSpec(1, 0.0, "t", 3, 1000, 1.0)
    cpu_on_other_node = JobSpec(
        2, 0.0, "t", 1, 1000, 1.0, allowed_models=frozenset({"T4"}), cpu_milli=5000
    )
    assert state.fits_when_empty(fits)
    assert not state.fits_when_empty(too_wide)
    assert not state.fits_when_empty(cpu_on_other_node)
