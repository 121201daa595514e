"""Suspend-resume time-slicing on one GPU, against schedules worked out by hand.

One V100 server with one GPU, every job 1 step/s alone, quantum 60 s, each hand-over
(suspend one job, resume the next) leaves the GPU idle for 1 s.
"""

from __future__ import annotations

import pytest
from gandiva_builders import constant_workload, job, run_named, v100s

from gpumosaic.results.result import JobStatus, SimResult

QUANTUM, SWITCH = 60.0, 1.0


def run(jobs: list, **kw: object) -> SimResult:
    return run_named(
        v100s(1, 1),
        constant_workload(jobs),
        quantum_s=QUANTUM,
        switch_s=SWITCH,
        check_invariants=True,
        **kw,  # type: ignore[arg-type]
    )


def finish(result: SimResult) -> dict[int, float]:
    assert all(r.status is JobStatus.COMPLETED for r in result.records)
    return {r.job_id: r.finish_s for r in result.records}


def test_two_jobs_take_turns() -> None:
    # A and B, 100 steps each, both at t=0 (A first).
    #   A runs   0-60   (A: 60 done)     hand-over 60-61
    #   B runs  61-121  (B: 60 done)     hand-over 121-122
    #   A runs 122-162  (A: 100, done at 162)
    #   B resumes after a hand-over 162-163, runs 163-203 (B: 100, done at 203)
    result = run([job(0, 100), job(1, 100)])
    assert finish(result) == pytest.approx({0: 162.0, 1: 203.0})
    by_id = {r.job_id: r for r in result.records}
    # Suspended = time placed but not holding the GPU: A 162 - 100 = 62, B 203 - 100 = 103.
    assert by_id[0].suspended_s == pytest.approx(62.0)
    assert by_id[1].suspended_s == pytest.approx(103.0)
    assert (by_id[0].handovers, by_id[1].handovers) == (1, 2)  # resumes into the GPU
    extra = result.gandiva
    assert extra.overhead_gpu_s == pytest.approx(3 * SWITCH)
    assert extra.busy_gpu_s == pytest.approx(200.0)


def test_three_jobs_round_robin() -> None:
    # A 100, B 50, C 150 steps, all at t=0, in the order A, B, C.
    #   A   0-60   (A 60)     switch 60-61
    #   B  61-111  (B 50, done at 111: finishes inside its slice)   switch 111-112
    #   C 112-172  (C 60)     switch 172-173
    #   A 173-213  (A 100, done at 213)                              switch 213-214
    #   C 214-274  (C 120); C is alone now: no quantum, no switch, runs on
    #   C 274-304  (C 150, done at 304)
    result = run([job(0, 100), job(1, 50), job(2, 150)])
    assert finish(result) == pytest.approx({0: 213.0, 1: 111.0, 2: 304.0})
    assert result.gandiva.overhead_gpu_s == pytest.approx(4 * SWITCH)


def test_newcomer_gets_the_gpu_once_the_incumbent_used_its_quantum() -> None:
    # A (200 steps) runs alone from 0; B (30 steps) arrives at 90, when A has already had
    # more than a quantum: A is suspended at once.
    #   switch 90-91, B 91-121 (done), switch 121-122, A 122-232 (110 left, done at 232)
    result = run([job(0, 200), job(1, 30, arrival=90.0)])
    assert finish(result) == pytest.approx({0: 232.0, 1: 121.0})


def test_without_time_slicing_jobs_queue_first_come_first_served() -> None:
    # No oversubscription: B waits until A is done, with no switching cost at all.
    result = run([job(0, 100), job(1, 100)], time_slicing=False)
    assert finish(result) == pytest.approx({0: 100.0, 1: 200.0})
    assert result.gandiva.handovers == 0


def starts(result: SimResult) -> dict[int, float]:
    return {r.job_id: r.start_s for r in result.records}


def test_shortest_work_first_starts_the_short_job_first() -> None:
    # One GPU, no oversubscription: A (100 s) runs; B (50 s, t=1) and C (10 s, t=2) queue.
    # FIFO starts B at 100 and C at 150; SJF starts C at 100 (ends 110), then B at 110.
    jobs = [job(0, 100), job(1, 50, arrival=1.0), job(2, 10, arrival=2.0)]
    fifo = run(jobs, time_slicing=False)
    assert starts(fifo) == pytest.approx({0: 0.0, 1: 100.0, 2: 150.0})
    sjf = run(jobs, time_slicing=False, order="sjf")
    assert starts(sjf) == pytest.approx({0: 0.0, 1: 110.0, 2: 100.0})
    assert finish(sjf) == pytest.approx({0: 100.0, 1: 160.0, 2: 110.0})


def test_priority_starts_the_heavier_job_first() -> None:
    # B (weight 1, t=1) arrives before C (weight 3, t=2): FIFO starts B at 100, priority C.
    jobs = [job(0, 100), job(1, 10, arrival=1.0), job(2, 10, arrival=2.0, priority=3.0)]
    assert starts(run(jobs, time_slicing=False)) == pytest.approx({0: 0.0, 1: 100.0, 2: 110.0})
    by_weight = run(jobs, time_slicing=False, order="priority")
    assert starts(by_weight) == pytest.approx({0: 0.0, 1: 110.0, 2: 100.0})


def test_queue_order_decides_who_joins_a_time_sliced_set() -> None:
    # max_share=2: A and B take turns; C (50 s, t=2) and D (10 s, t=3) queue. The first
    # free place goes to C under FIFO and to D under SJF.
    jobs = [job(0, 100), job(1, 200, arrival=1.0), job(2, 50, arrival=2.0), job(3, 10, arrival=3.0)]
    fifo = starts(run(jobs, max_share=2))
    sjf = starts(run(jobs, max_share=2, order="sjf"))
    assert fifo[2] < fifo[3] and sjf[3] < sjf[2]
    assert sjf[3] == pytest.approx(fifo[2])  # the same place, given to the other job


def test_max_share_bounds_oversubscription() -> None:
    # max_share=2: the third job queues until a unit leaves; B finishes at 111 as in the
    # three-job case, then C is placed (112 onwards it takes turns with A).
    result = run([job(0, 100), job(1, 50), job(2, 150)], max_share=2)
    records = {r.job_id: r for r in result.records}
    assert records[2].start_s == pytest.approx(111.0)
    assert all(r.status is JobStatus.COMPLETED for r in result.records)


def test_timeline_measures_fragmentation_against_the_job_shapes() -> None:
    # One 4-GPU server. j0 (1 GPU) starts; j1 (4 GPUs) cannot start (3 GPUs free, and the
    # server's affinity is 1, so no oversubscription) and queues. Target shapes: half
    # 1-GPU jobs, half 4-GPU jobs. Free milli 3000: a 1-GPU job can use all of it (0
    # fragmented), a 4-GPU job none (3000). Expected 0.5 * 0 + 0.5 * 3000 = 1500, rate
    # 1500 / 3000 = 0.5.
    jobs = [job(0, 100.0), job(1, 50.0, k=4)]
    result = run_named(v100s(1, 4), constant_workload(jobs), check_invariants=True)
    timeline = result.timeline
    assert timeline.time_s[0] == 0.0 and timeline.queued[0] == 1
    assert timeline.fragmentation_rate[0] == pytest.approx(0.5)
    assert {r.job_id: r.status for r in result.records} == {
        0: JobStatus.COMPLETED,
        1: JobStatus.COMPLETED,
    }


def test_no_backfill_keeps_a_later_small_job_behind_a_blocked_big_one() -> None:
    # One 2-GPU server, no time-slicing. j0 (1 GPU, 100 s) starts at 0; j1 (2 GPUs) comes at
    # 1 and finds 1 free GPU; j2 (1 GPU, 10 s) comes at 2. Backfill: j2 takes the free GPU
    # at 2. Strict FIFO: j2 waits for j1, which starts when j0 ends (100) and runs 50 s, so
    # j2 starts at 150.
    jobs = [job(0, 100.0), job(1, 50.0, arrival=1.0, k=2), job(2, 10.0, arrival=2.0)]

    def starts(backfill: bool) -> dict[int, float]:
        result = run_named(
            v100s(1, 2),
            constant_workload(jobs),
            time_slicing=False,
            check_invariants=True,
            backfill=backfill,
        )
        assert all(r.status is JobStatus.COMPLETED for r in result.records)
        return {r.job_id: r.start_s for r in result.records}

    assert starts(True) == {0: 0.0, 1: 100.0, 2: 2.0}
    assert starts(False) == {0: 0.0, 1: 100.0, 2: 150.0}


def test_counters_add_field_by_field() -> None:
    from dataclasses import fields

    from gpumosaic.mechanisms.gandiva.counters import GandivaCounters

    names = [f.name for f in fields(GandivaCounters)]
    a = GandivaCounters(*range(1, len(names) + 1))
    b = GandivaCounters(*(10 * i for i in range(1, len(names) + 1)))
    total = a + b
    assert [getattr(total, n) for n in names] == [11 * i for i in range(1, len(names) + 1)]
    assert a + GandivaCounters() is a and not GandivaCounters() and a
