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
