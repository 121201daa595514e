"""Gandiva's decisions without a clock: a hand-written driver and the actions it gets.

Each test plays the live driver by hand: it admits jobs, reports measured step rates and
the jobs that finish, wakes a GPU set when ``next_due`` says, and checks the typed actions
(start, suspend, resume, pack, unpack, migrate). No simulator, no event engine: the times
below are the "wall clock" the test passes in. Quantum 60 s, hand-over 1 s, migration
30 s, trial 60 s.
"""

from __future__ import annotations

import numpy as np
import pytest

from gpumosaic.fallbacks import Fallback
from gpumosaic.mechanisms.gandiva import (
    GandivaConfig,
    GandivaDecider,
    Migrate,
    MoveReason,
    Pack,
    Resume,
    Start,
    Step,
    Suspend,
    Unpack,
)
from gpumosaic.mechanisms.gandiva.sim import run_gandiva
from gpumosaic.model import ClusterSpec, JobSpec
from gpumosaic.policies.ordering import build_queue_order
from gpumosaic.workloads.throughputs import ConstantThroughputs, GavelThroughputTable, Throughputs
from gpumosaic.workloads.workload import Workload

GOOD = "good"  # the table says a good pair keeps 0.8 of its speed each (sum 1.6)


def job(job_id: int, k: int = 1, job_type: str = "x", work: float = 1000.0) -> JobSpec:
    return JobSpec(
        id=job_id, arrival_s=0.0, job_type=job_type, num_gpu=k, gpu_milli=1000, work=work
    )


def v100s(servers: int, per_server: int) -> ClusterSpec:
    return ClusterSpec.from_counts([("v100", servers * per_server)], gpus_per_node=per_server)


def pair_table() -> GavelThroughputTable:
    isolated = {"v100": {(GOOD, sf): 1.0 for sf in (1, 2, 4)}}
    packed = {"v100": {((GOOD, 1), (GOOD, 1)): (0.8, 0.8)}}
    return GavelThroughputTable(isolated, packed, "test-pairs")


def decider(
    cluster: ClusterSpec, throughputs: Throughputs | None = None, **config: object
) -> GandivaDecider:
    settings: dict[str, object] = {
        "quantum_s": 60.0,
        "switch_s": 1.0,
        "migration_cost_s": 30.0,
        "profile_s": 60.0,
        "packing": False,
        "migration": False,
        **config,
    }
    return GandivaDecider(
        cluster,
        throughputs or ConstantThroughputs(),
        GandivaConfig(**settings),
        np.random.default_rng(0),
        order=build_queue_order("fifo"),
    )


def only_set(d: GandivaDecider) -> int:
    (group,) = list(d.sets)
    return group.gid


def test_time_slicing_suspends_and_resumes_when_jobs_outnumber_gpus() -> None:
    d = decider(v100s(1, 1), max_share=2)
    a = d.admit(job(0), 0.0)
    b = d.admit(job(1), 0.0)
    c = d.admit(job(2), 0.0)
    gpus = (0,)
    assert a.actions == (Start(0, 0, gpus, running=True),)
    # B joins A's GPU but waits its turn (suspended); C finds the set full (max_share 2).
    assert b.actions == (Start(1, 0, gpus, running=False),)
    assert c.actions == () and [j.id for j in d.queue] == [2]
    gid = only_set(d)
    assert d.next_due(gid) == 60.0  # A's quantum ends
    # 60: A is suspended, B resumes after a 1 s hand-over and keeps the GPU until 121.
    assert d.wake(gid, 60.0).actions == (Suspend(0, 0), Resume(1, 0, gpus, 61.0))
    assert d.next_due(gid) == 121.0
    assert d.wake(gid, 121.0).actions == (Suspend(1, 0), Resume(0, 0, gpus, 122.0))
    # A exits at 150 (reported by the driver): B resumes, and C, queued, joins the set.
    done = d.job_finished(0, 150.0)
    assert done.actions == (Resume(1, 0, gpus, 151.0), Start(2, 0, gpus, running=False))
    assert done.scheduled and gid in done.retimed and d.queue == []
    assert (d.jobs[0].suspensions, d.jobs[1].suspensions, d.jobs[1].handovers) == (1, 1, 2)


def test_a_set_alone_has_no_quantum() -> None:
    d = decider(v100s(1, 1))
    d.admit(job(0), 0.0)
    assert d.next_due(only_set(d)) == float("inf")  # nothing to decide until A exits
    step = d.job_finished(0, 500.0)
    assert step.actions == () and len(d.sets) == 0 and d.state.allocated_gpu_milli == 0


def packed_pair(d: GandivaDecider) -> tuple[int, Step]:
    """A and B (good) on one GPU: B oversubscribes and, waiting, is packed beside A."""
    d.admit(job(0, job_type=GOOD), 0.0)
    step = d.admit(job(1, job_type=GOOD), 0.0)
    return only_set(d), step


def test_a_pair_is_undone_when_its_measured_rates_say_it_hurts() -> None:
    d = decider(v100s(1, 1), pair_table(), packing=True)
    gid, step = packed_pair(d)
    assert step.actions == (Start(1, 0, (0,), running=False), Pack(1, 0, 0, (0,), running=True))
    # The guest's state comes onto the GPU (1 s), then the pair runs 60 s on trial.
    assert d.next_due(gid) == 61.0
    # The table predicts 1.6, but the jobs report 0.3 steps/s each: 0.3 + 0.3 < 1.
    d.observe(0, 0.3)
    d.observe(1, 0.3)
    verdict = d.wake(gid, 61.0)
    assert verdict.actions == (Unpack(1, 0, 0, pytest.approx(0.6)),)
    assert (d.counters.packs_tried, d.counters.packs_kept, d.counters.packs_undone) == (1, 0, 1)
    assert d.bad_pairs == {(frozenset((0, 1)), "V100")}  # never tried again on a V100
    # B takes turns again, alone: the running unit is A alone, B waits behind it.
    group = d.group(gid)
    assert group is not None
    assert [[j.id for j in u.jobs] for u in group.units] == [[0], [1]]
    assert not d.fallbacks  # both members were measured


def test_a_pair_that_measures_well_is_kept() -> None:
    d = decider(v100s(1, 1), pair_table(), packing=True)
    gid, _ = packed_pair(d)
    d.observe(0, 0.9)
    d.observe(1, 0.7)
    assert d.wake(gid, 61.0).actions == ()
    assert (d.counters.packs_kept, d.counters.packs_undone) == (1, 0)


def test_a_verdict_without_measurements_uses_the_table_and_says_so() -> None:
    d = decider(v100s(1, 1), pair_table(), packing=True)
    gid, _ = packed_pair(d)
    assert d.wake(gid, 61.0).actions == ()  # the table's 1.6: kept
    assert dict(d.fallbacks.counts) == {Fallback.UNMEASURED_PAIR: 1}


def test_a_rate_reported_for_a_suspended_job_is_dropped() -> None:
    d = decider(v100s(1, 1), pair_table(), packing=True)
    gid, _ = packed_pair(d)
    d.observe(0, 0.3)
    d.observe(1, 0.3)
    d.wake(gid, 61.0)  # undone: B is suspended
    d.observe(1, 5.0)  # a late report from before the suspension
    assert d.rate_book.measured(1, "V100") is None
    assert d.rate_book.measured(1, "V100", partner=0) == 0.3


@pytest.mark.parametrize("rate", [float("nan"), float("inf"), -1.0])
def test_a_rate_that_is_not_a_rate_is_refused(rate: float) -> None:
    d = decider(v100s(1, 1))
    d.admit(job(0), 0.0)
    with pytest.raises(ValueError, match="job 0"):
        d.observe(0, rate)


def test_a_migration_gives_a_big_job_a_whole_server() -> None:
    # Two 4-GPU servers. A 1-GPU job takes one server, a 2-GPU job the other (affinity
    # keeps sizes apart); a 4-GPU job then finds 3 + 2 free GPUs but no 4 on one server.
    # With migration the 1-GPU job moves beside the 2-GPU job (one job, one GPU: the
    # cheapest move) and the 4-GPU job gets a whole server.
    d = decider(v100s(2, 4), migration=True, time_slicing=False)
    (small,) = d.admit(job(0, k=1), 0.0).actions
    (medium,) = d.admit(job(1, k=2), 0.0).actions
    assert isinstance(small, Start) and isinstance(medium, Start)
    assert small.node != medium.node
    big = d.admit(job(2, k=4), 10.0)
    migrate, start = big.actions
    assert migrate == Migrate(0, small.node, medium.node, (2,), MoveReason.DEFRAGMENT, 40.0)
    assert start == Start(2, small.node, (0, 1, 2, 3), running=True)
    assert (d.counters.migrations, d.counters.defragmentations) == (1, 1)
    assert d.jobs[0].migrations == 1


def test_without_migration_the_big_job_waits() -> None:
    d = decider(v100s(2, 4), migration=False, time_slicing=False)
    d.admit(job(0, k=1), 0.0)
    d.admit(job(1, k=2), 0.0)
    assert d.admit(job(2, k=4), 10.0).actions == ()
    assert [j.id for j in d.queue] == [2]


def test_a_time_sliced_job_migrates_to_a_gpu_that_frees_up() -> None:
    # Two 1-GPU servers, three jobs: C time-slices with A or B. When the other server's
    # job exits, C, waiting, migrates there and has a GPU to itself again.
    d = decider(v100s(2, 1), migration=True)
    starts = [d.admit(job(i), 0.0).actions[0] for i in range(3)]
    assert all(isinstance(s, Start) for s in starts)
    a, b, c = starts
    assert isinstance(a, Start) and isinstance(b, Start) and isinstance(c, Start)
    assert a.node != b.node and not c.running
    other = b if c.node == a.node else a
    step = d.job_finished(other.job_id, 100.0)
    assert step.actions == (Migrate(2, c.node, other.node, (0,), MoveReason.SPREAD, 130.0),)
    assert d.counters.spread_moves == 1 and d.jobs[2].migrations == 1
    # C holds its new GPU alone: no quantum is due anywhere.
    assert all(d.next_due(g.gid) == float("inf") for g in d.sets)


def test_a_driver_that_only_executes_the_actions_gets_the_simulators_schedule() -> None:
    # Three jobs of 100, 50 and 150 steps at 1 step/s on one GPU. The driver knows
    # nothing but the actions: a job runs from its Start (running) or Resume's at_s
    # until its Suspend; it foresees finishes from that and wakes sets at next_due.
    jobs = [job(0, work=100.0), job(1, work=50.0), job(2, work=150.0)]
    d = decider(v100s(1, 1))
    running_from: dict[int, float] = {}
    done = {j.id: 0.0 for j in jobs}

    def execute(step: Step, now: float) -> None:
        for action in step.actions:
            if isinstance(action, Start) and action.running:
                running_from[action.job_id] = now
            elif isinstance(action, Resume):
                running_from[action.job_id] = action.at_s
            elif isinstance(action, Suspend):
                done[action.job_id] += now - running_from.pop(action.job_id)

    for spec in jobs:
        execute(d.admit(spec, 0.0), 0.0)
    finished: dict[int, float] = {}
    for _ in range(100):  # bounded: a handful of quanta
        if not running_from:
            break
        ((job_id, since),) = running_from.items()
        finish_at = since + (jobs[job_id].work - done[job_id])
        gid = d.jobs[job_id].group
        if finish_at <= d.next_due(gid):  # at equal times a finish goes first
            del running_from[job_id]
            finished[job_id] = finish_at
            execute(d.job_finished(job_id, finish_at), finish_at)
        else:
            now = d.next_due(gid)
            execute(d.wake(gid, now), now)
    simulated = run_gandiva(
        v100s(1, 1),
        Workload("three", jobs, ConstantThroughputs()),
        np.random.default_rng(0),
        quantum_s=60.0,
        switch_s=1.0,
        packing=False,
        migration=False,
    )
    assert finished == {r.job_id: r.finish_s for r in simulated.records}
    assert finished == {
        0: 213.0,
        1: 111.0,
        2: 304.0,
    }  # tests/mechanisms/gandiva/sim/test_timeslice.py


def test_a_first_start_costs_start_s_and_nothing_else_moves() -> None:
    # One job alone, then two jobs on one GPU: the first start of each set is delayed by
    # start_s (the live launch latency, sim-vs-live), the hand-overs still by switch_s.
    def finishes(start_s: float) -> dict[int, float]:
        jobs = [job(0, work=100.0), job(1, work=100.0)]
        result = run_gandiva(
            v100s(1, 1),
            Workload("two", jobs, ConstantThroughputs()),
            np.random.default_rng(0),
            quantum_s=60.0,
            switch_s=1.0,
            start_s=start_s,
            packing=False,
            migration=False,
        )
        return {r.job_id: r.finish_s for r in result.records}

    before, after = finishes(0.0), finishes(7.0)
    # job 0 runs 0-60, switch, job 1 61-121, switch, job 0 122-162, switch, job 1 163-203
    assert before == {0: 162.0, 1: 203.0}
    assert after == {j: t + 7.0 for j, t in before.items()}


def test_a_trial_left_below_the_clocks_resolution_is_over() -> None:
    # A live run's measured costs (sim-vs-live): a trial's residue of 4.5e-13 s at
    # t = 4,223.9 s was "not over" while its due time equalled now, so the set was woken
    # at the same time for ever. The run ends, and the pair on trial gets its verdict.
    from gpumosaic.mechanisms.gandiva.sim.simulator import GandivaSimulator
    from gpumosaic.run.build import build_parts
    from gpumosaic.run.description import RunDescription
    from gpumosaic.runtime.cluster import RayNode, discover

    live = discover([RayNode("node-a", "127.0.0.1", (("V100", 2), ("P100", 2)))], None)
    description = RunDescription(
        cluster="v100:2,p100:2",
        workload="gavel:jobs=10,rate=0",
        policy="fifo",
        mechanism="gandiva",
        sharing="gandiva:quantum=3600,profile=3600,start=623.9,switch=279.8,migration_cost=169",
    )
    parts = build_parts(description, cluster=live.spec)
    assert isinstance(parts.sharing, GandivaConfig)
    simulator = GandivaSimulator(
        parts.cluster, parts.workload, parts.sharing, parts.rng, order=build_queue_order("fifo")
    )
    result = simulator.run()
    assert all(r.status.value == "completed" for r in result.records)
    assert simulator.decider.counters.packs_undone >= 1
