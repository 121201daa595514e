"""Bookkeeping invariants of the event simulator, for any jobs and any placement."""

from dataclasses import replace
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from sim_builders import cluster, job, node, workload

from gpumosaic.mechanisms.event.simulator import EventSimulator
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement.registry import build_placement
from gpumosaic.placement.workload import TargetWorkload
from gpumosaic.policies.ordering import Fifo
from gpumosaic.results.result import JobStatus

PLACEMENTS = [
    "fgd",
    "pwr",
    "best-fit",
    "first-fit",
    "worst-fit",
    "random",
    "dotprod",
    "gpupacking",
    "gpuclustering",
    "pwr=200,fgd=800",
]


class CheckedPlacement:
    """Wraps a strategy and checks every invariant before and after each decision."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.decisions = 0

    def place(
        self, state: ClusterState, job: JobSpec, rng: np.random.Generator
    ) -> Assignment | None:
        state.check_invariants()
        assert (state.gpu_free >= 0).all() and (state.gpu_free <= 1000).all()
        assert (state.cpu_free >= 0).all() and (state.memory_free >= 0).all()
        self.decisions += 1
        return self.inner.place(state, job, rng)


job_strategy = st.builds(
    lambda i, arrival, duration, num_gpu, milli, cpu, mem: job(
        i,
        arrival=arrival,
        duration=duration,
        num_gpu=num_gpu,
        milli=milli if num_gpu == 1 else 1000,
        cpu=cpu,
        mem=mem,
    ),
    st.integers(0, 0),
    st.floats(0, 100, allow_nan=False),
    st.floats(1, 50, allow_nan=False),
    st.integers(0, 3),
    st.sampled_from([100, 250, 333, 500, 700, 1000]),
    st.sampled_from([0, 1000, 4000, 9000]),
    st.sampled_from([0, 1024, 8192]),
)


@settings(max_examples=40, deadline=None)
@given(
    specs=st.lists(job_strategy, min_size=1, max_size=25),
    placement=st.sampled_from(PLACEMENTS),
    backfill=st.booleans(),
    seed=st.integers(0, 3),
)
def test_every_job_is_accounted_for_and_capacity_holds(
    specs: list[JobSpec], placement: str, backfill: bool, seed: int
) -> None:
    jobs = [replace(s, id=i, name=f"job{i}") for i, s in enumerate(specs)]
    spec = cluster(
        node("a", gpus=2, cpu=8000, mem=8192), node("b", gpus=1, model="T4", cpu=4000, mem=4096)
    )
    w = workload(jobs)
    target = TargetWorkload.from_jobs(jobs)
    checked = CheckedPlacement(build_placement(placement, target))
    sim = EventSimulator(
        spec, w, checked, Fifo(), rng=np.random.default_rng(seed), backfill=backfill, target=target
    )
    result = sim.run()
    sim.state.check_invariants()
    assert len(result.records) == len(jobs)
    for record in result.records:
        # A finished run has nothing left running or queued: each job completed or was
        # rejected with a reason.
        assert record.status in (JobStatus.COMPLETED, JobStatus.REJECTED)
        if record.status is JobStatus.REJECTED:
            assert record.reason
        else:
            assert record.finish_s >= record.start_s >= record.arrival_s
    assert sim.state.allocated_gpu_milli == 0
    assert result.timeline.allocated_milli.max() <= sim.state.total_gpu_milli


def _outcome(sim: EventSimulator) -> tuple[object, ...]:
    result = sim.run()
    timeline = tuple(np.asarray(getattr(result.timeline, f)).tobytes() for f in TIMELINE_FIELDS)
    return result.records, timeline, result.stats.events, result.end_s


TIMELINE_FIELDS = (
    "time_s",
    "allocated_milli",
    "running",
    "queued",
    "fragmentation_rate",
    "power_gpu_w",
    "power_cpu_w",
)


@settings(max_examples=30, deadline=None)
@given(
    specs=st.lists(job_strategy, min_size=1, max_size=25),
    placement=st.sampled_from(PLACEMENTS),
    backfill=st.booleans(),
    seed=st.integers(0, 3),
)
def test_skipping_shapes_no_released_node_can_hold_changes_no_decision(
    specs: list[JobSpec], placement: str, backfill: bool, seed: int
) -> None:
    """The pass skips a blocked shape unless a node released since could hold it; a
    pass that is told of no release re-tries every blocked shape after any release. Both
    give the same run, bit for bit (records, timeline, event count)."""
    jobs = [replace(s, id=i, name=f"job{i}") for i, s in enumerate(specs)]
    spec = cluster(
        node("a", gpus=2, cpu=8000, mem=8192),
        node("b", gpus=1, model="T4", cpu=4000, mem=4096),
        node("c", gpus=4, cpu=16000, mem=16384),
    )
    target = TargetWorkload.from_jobs(jobs)
    outcomes = []
    for told in (True, False):
        strategy = build_placement(placement, target)
        sim = EventSimulator(
            spec,
            workload(jobs),
            strategy,
            Fifo(),
            rng=np.random.default_rng(seed),
            backfill=backfill,
            target=target,
        )
        if not told:
            sim.scheduling.released = lambda state, nodes: None  # type: ignore[method-assign]
        outcomes.append(_outcome(sim))
    assert outcomes[0] == outcomes[1]
