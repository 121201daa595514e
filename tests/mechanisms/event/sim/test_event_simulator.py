"""The event-driven simulator on golden small traces, worked out by hand."""

import math

import pytest
from sim_builders import cluster, job, node, simulate, workload

from gpumosaic.results.result import JobStatus
from gpumosaic.results.summary import summarize

# Two one-GPU V100 servers; durations in seconds (ConstantThroughputs: 1 step/s).
GOLDEN = [
    job(0, arrival=0, duration=100, milli=1000),
    job(1, arrival=0, duration=50, milli=500),
    job(2, arrival=0, duration=80, milli=500),
    job(3, arrival=10, duration=30, milli=1000),
    job(4, arrival=20, duration=10, milli=300),
]


def test_golden_trace_with_backfill() -> None:
    # t=0: j0 -> n0 (full); j1, j2 share n1 (500 + 500).
    # t=10 j3 (1000) and t=20 j4 (300) wait: no GPU has room.
    # t=50 j1 ends: n1 has 500 free; j3 still waits, j4 backfills on n1 until 60.
    # t=80 j2 ends: n1 is free -> j3 runs 80..110. t=100 j0 ends.
    result = simulate(cluster(node("n0"), node("n1")), workload(GOLDEN), "first-fit", "fifo")
    by_id = {r.job_id: r for r in result.records}
    assert [by_id[i].start_s for i in range(5)] == [0, 0, 0, 80, 50]
    assert [by_id[i].jct_s for i in range(5)] == [100, 50, 80, 100, 40]
    summary = summarize(result)
    assert summary.avg_jct_s == pytest.approx(370 / 5)
    assert summary.makespan_s == 110
    # milli-seconds: 1000*100 + 500*50 + 500*80 + 1000*30 + 300*10 = 198,000 of 2000*110.
    assert summary.utilization == pytest.approx(198_000 / 220_000)
    assert summary.completed == 5


def test_golden_trace_strict_fifo_blocks_behind_the_head() -> None:
    # As above, but at t=50 j4 may not pass j3: j3 takes n1 at 80, j4 waits for n0 at 100.
    result = simulate(
        cluster(node("n0"), node("n1")), workload(GOLDEN), "first-fit", "fifo", backfill=False
    )
    jct = {r.job_id: r.jct_s for r in result.records}
    assert jct == {0: 100, 1: 50, 2: 80, 3: 100, 4: 90}


def test_fractional_jobs_share_one_gpu() -> None:
    jobs = [job(i, duration=10, milli=250) for i in range(4)]
    result = simulate(cluster(node("n0")), workload(jobs), "best-fit", "fifo")
    assert all(r.start_s == 0 and r.finish_s == 10 for r in result.records)
    assert result.timeline.allocated_milli.max() == 1000


def test_job_that_never_fits_is_rejected_with_a_reason_and_counted() -> None:
    jobs = [job(0, duration=5), job(1, num_gpu=4, duration=5), job(2, models=frozenset({"T4"}))]
    result = simulate(cluster(node("n0", gpus=2)), workload(jobs), "fgd", "fifo")
    status = {r.job_id: r.status for r in result.records}
    assert status == {0: JobStatus.COMPLETED, 1: JobStatus.REJECTED, 2: JobStatus.REJECTED}
    reasons = {r.job_id: r.reason for r in result.records}
    assert reasons[1].startswith("never_fits") and "num_gpu=4" in reasons[1]
    assert "gpu_spec=T4" in reasons[2]
    summary = summarize(result)
    assert (summary.jobs, summary.completed, summary.rejected) == (3, 1, 2)


def test_cpu_only_jobs_and_cpu_limits() -> None:
    # n0 has 4000 milli-CPU: the two 3000-milli CPU jobs cannot run together.
    jobs = [job(0, num_gpu=0, cpu=3000, duration=10), job(1, num_gpu=0, cpu=3000, duration=10)]
    result = simulate(cluster(node("n0", cpu=4000)), workload(jobs), "best-fit", "fifo")
    assert sorted(r.finish_s for r in result.records) == [10, 20]


def test_until_leaves_jobs_running_and_queued_with_reasons() -> None:
    jobs = [job(0, duration=100), job(1, duration=100)]
    result = simulate(cluster(node("n0")), workload(jobs), "fgd", "fifo", until_s=50)
    status = {r.job_id: r.status for r in result.records}
    assert status == {0: JobStatus.RUNNING, 1: JobStatus.QUEUED}
    queued = next(r for r in result.records if r.job_id == 1)
    assert queued.reason.startswith("waiting")
    assert math.isnan(queued.finish_s)


def test_measure_window_stops_when_its_jobs_are_done() -> None:
    jobs = [job(i, arrival=10.0 * i, duration=5) for i in range(10)]
    result = simulate(cluster(node("n0")), workload(jobs, measure=(2, 4)), "fgd", "fifo")
    # Job 3 (the last measured) ends at 35; job 4 arrives at 40 and is never seen.
    assert max(r.job_id for r in result.records) == 3
    summary = summarize(result)
    assert summary.measured_jobs == 2
    assert summary.avg_jct_s == 5


def test_same_seed_gives_identical_records_and_other_seeds_may_differ() -> None:
    from gpumosaic.workloads.spec import parse_cluster, parse_workload

    def run(seed: int) -> tuple[object, ...]:
        w = parse_workload("gavel:jobs=40,rate=20,milli=spatial", seed).workload
        return simulate(parse_cluster("v100:3,p100:3"), w, "random", "fifo", seed=seed).records

    assert run(3) == run(3)
    assert run(3) != run(4)
