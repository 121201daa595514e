"""The event mechanism's scheduling pass, called by hand with a state and no clock."""

from __future__ import annotations

import numpy as np

from gpumosaic.mechanisms.event import SchedulingPass
from gpumosaic.model import ClusterSpec, JobSpec, NodeSpec, gpu_model
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.registry import build_placement
from gpumosaic.policies.ordering import build_queue_order


def one_node(gpus: int) -> ClusterSpec:
    return ClusterSpec((NodeSpec("a", gpu_model("V100"), gpus, 64_000, 262_144),))


def job(job_id: int, arrival: float, num_gpu: int = 1, milli: int = 1000) -> JobSpec:
    return JobSpec(
        id=job_id, arrival_s=arrival, job_type="t", num_gpu=num_gpu, gpu_milli=milli, work=100.0
    )


def make_pass(backfill: bool) -> SchedulingPass:
    return SchedulingPass(build_placement("firstfit", None), build_queue_order("fifo"), backfill)


def test_strict_fifo_stops_at_the_head_and_backfill_goes_past_it() -> None:
    # One node with 2 GPUs: job 0 takes one, job 1 wants 2 (blocked), job 2 wants 1.
    jobs = [job(0, arrival=0.0), job(1, arrival=1.0, num_gpu=2), job(2, arrival=2.0)]
    started = {}
    for backfill in (False, True):
        state = ClusterState(one_node(2))
        scheduling = make_pass(backfill)
        for j in jobs:
            scheduling.add(j)
        started[backfill] = [j.id for j, _ in scheduling.run(state, np.random.default_rng(0))]
        assert len(scheduling) == 3 - len(started[backfill])
        assert int(state.gpu_free.sum()) == 2000 - 1000 * len(started[backfill])
    assert started == {False: [0], True: [0, 2]}


def test_a_second_pass_starts_what_was_freed_in_queue_order() -> None:
    state = ClusterState(one_node(1))
    scheduling = make_pass(backfill=True)
    for j in (job(5, arrival=3.0), job(4, arrival=2.0), job(6, arrival=1.0, milli=500)):
        scheduling.add(j)
    rng = np.random.default_rng(0)
    first = scheduling.run(state, rng)
    assert [j.id for j, _ in first] == [6]  # earliest arrival; the whole-GPU jobs wait
    assert sorted(j.id for j in scheduling.pending()) == [4, 5]
    state.release(6)
    assert [j.id for j, _ in scheduling.run(state, rng)] == [4]
    assert [j.id for j in scheduling.pending()] == [5]


class CountingPlacement:
    """First fit, counting the decisions it is asked for."""

    def __init__(self) -> None:
        self.inner = build_placement("firstfit", None)
        self.name = "counting"
        self.calls = 0

    def place(self, state, job, rng):  # type: ignore[no-untyped-def]
        self.calls += 1
        return self.inner.place(state, job, rng)


def two_nodes() -> ClusterSpec:
    return ClusterSpec(
        (
            NodeSpec("a", gpu_model("V100"), 2, 64_000, 262_144),
            NodeSpec("b", gpu_model("T4"), 1, 64_000, 262_144),
        )
    )


def test_a_blocked_shape_is_retried_only_when_a_released_node_could_hold_it() -> None:
    state = ClusterState(two_nodes())
    placement = CountingPlacement()
    scheduling = SchedulingPass(placement, build_queue_order("fifo"), backfill=True)
    rng = np.random.default_rng(0)
    for j in (job(0, 0.0), job(1, 0.0), job(2, 0.0)):  # fill all three GPUs
        scheduling.add(j)
    assert len(scheduling.run(state, rng)) == 3
    scheduling.add(job(3, 1.0, num_gpu=2))  # only node a could ever hold two GPUs
    assert scheduling.run(state, rng) == [] and placement.calls == 4
    # A GPU of node b comes free: b can never hold two GPUs, so no decision is asked for.
    node = state.release(2).node
    scheduling.released(state, [node])
    assert scheduling.run(state, rng) == [] and placement.calls == 4
    # One GPU of node a: still not two there, still no decision.
    scheduling.released(state, [state.release(0).node])
    assert scheduling.run(state, rng) == [] and placement.calls == 4
    # The other one: now it fits, and the pass asks.
    scheduling.released(state, [state.release(1).node])
    assert [j.id for j, _ in scheduling.run(state, rng)] == [3] and placement.calls == 5


def test_an_unreported_release_makes_every_blocked_shape_retry() -> None:
    state = ClusterState(one_node(1))
    placement = CountingPlacement()
    scheduling = SchedulingPass(placement, build_queue_order("fifo"), backfill=True)
    rng = np.random.default_rng(0)
    scheduling.add(job(0, 0.0, milli=600))
    scheduling.add(job(1, 0.0, milli=600))
    assert len(scheduling.run(state, rng)) == 1 and placement.calls == 2
    scheduling.add(job(2, 1.0, milli=300))  # fits beside job 0
    assert len(scheduling.run(state, rng)) == 1 and placement.calls == 3
    state.release(2)  # not reported: the pass cannot know where, so it asks again
    assert scheduling.run(state, rng) == [] and placement.calls == 4


def test_the_release_log_forgets_its_oldest_half_and_then_re_tries(monkeypatch) -> None:
    from gpumosaic.mechanisms.event import scheduling_pass

    monkeypatch.setattr(scheduling_pass, "RELEASE_LOG_LIMIT", 4)
    state = ClusterState(two_nodes())
    placement = CountingPlacement()
    scheduling = SchedulingPass(placement, build_queue_order("fifo"), backfill=True)
    rng = np.random.default_rng(0)
    scheduling.add(job(0, 0.0))  # a whole GPU of node a
    scheduling.add(job(1, 0.0, num_gpu=2))  # blocked while job 0 runs
    holders = [job(10 + i, 1.0, milli=100) for i in range(6)]  # on a's other GPU
    for j in holders:
        scheduling.add(j)
    assert [j.id for j, _ in scheduling.run(state, rng)] == [0] + [j.id for j in holders]
    assert placement.calls == 8
    for j in holders:  # six releases before the next pass: the log drops its start
        scheduling.released(state, [state.release(j.id).node])
    # Job 1 failed before the log's start: it is asked for again.
    assert scheduling.run(state, rng) == [] and placement.calls == 9
    # From here on the log covers it: a release that cannot help asks nothing.
    scheduling.add(job(20, 2.0, milli=100))
    assert len(scheduling.run(state, rng)) == 1 and placement.calls == 10
    scheduling.released(state, [state.release(20).node])
    assert scheduling.run(state, rng) == [] and placement.calls == 10


def test_shapes_tested_together_are_tested_again_after_the_pass_places_on_their_node() -> None:
    state = ClusterState(two_nodes())
    placement = CountingPlacement()
    scheduling = SchedulingPass(placement, build_queue_order("fifo"), backfill=True)
    rng = np.random.default_rng(0)
    for j in (job(0, 0.0), job(1, 0.0), job(2, 0.0)):  # fill all three GPUs
        scheduling.add(j)
    assert len(scheduling.run(state, rng)) == 3 and placement.calls == 3
    scheduling.add(job(3, 1.0))  # a whole GPU
    scheduling.add(job(4, 2.0, milli=600))  # another shape
    assert scheduling.run(state, rng) == [] and placement.calls == 5
    # One GPU of node a comes free: both shapes could use it as the pass starts; job 3
    # (first in queue order) takes it, and job 4's shape is then tested again on node a
    # (no room left) without asking the placement.
    scheduling.released(state, [state.release(0).node])
    assert [j.id for j, _ in scheduling.run(state, rng)] == [3] and placement.calls == 6
    assert [j.id for j in scheduling.pending()] == [4]
    # Node b frees: only the 600-milli shape waits, and b holds it.
    scheduling.released(state, [state.release(2).node])
    assert [j.id for j, _ in scheduling.run(state, rng)] == [4] and placement.calls == 7
