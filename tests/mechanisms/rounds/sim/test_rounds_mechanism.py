"""The round simulator end to end on tiny clusters with a hand-set policy."""

from __future__ import annotations

import numpy as np
import pytest
from rounds_builders import FixedPolicy, WorstFit, equal_share, job, run_rounds, v100s, workload

from gpumosaic.results.outcome import RejectReason
from gpumosaic.results.result import JobStatus


def test_job_runs_int_rate_times_round_steps_and_jct_is_last_step():
    # 1000 steps at 1 step/s: rounds of 360, 360, 280 steps; it keeps its GPU throughout.
    res = run_rounds(v100s(1), workload([job(0, 1000.0)]), FixedPolicy(equal_share), WorstFit())
    (rec,) = res.records
    assert rec.status is JobStatus.COMPLETED
    assert rec.jct_s == pytest.approx(1000.0)
    assert res.stats.rounds == 3
    assert res.leases is not None and res.leases.extensions == 2


def test_gpu_freed_only_at_round_end():
    # One GPU. Job 0 needs 100 s; job 1 (waiting) starts at the end of the 360 s round?
    # No: the round ends when its last job stops, at 100 s, and job 1 starts then.
    # With a second long job in the round, the round lasts 360 s and job 1 waits for it.
    policy = FixedPolicy(lambda inp: np.where(np.array(inp.job_ids)[:, None] < 2, 1.0, 0.0))
    jobs = [job(0, 100.0), job(1, 5000.0), job(2, 50.0)]
    res = run_rounds(v100s(2), workload(jobs), policy, WorstFit(), resolve_interval_s=1e9)
    rec = {r.job_id: r for r in res.records}
    assert rec[0].finish_s == pytest.approx(100.0)
    # Job 2 is not picked while jobs 0 and 1 hold both GPUs; GPU of job 0 frees at 360 s.
    assert rec[2].start_s == pytest.approx(360.0)


def test_new_job_waits_for_the_next_solve():
    # Job 1 arrives at 10 s; the allocation solved at 0 s does not know it. It may run only
    # once a solve includes it: the t = 0 solve does not start the interval (Gavel), so the
    # round boundary at 360 s re-solves.
    policy = FixedPolicy(equal_share)
    res = run_rounds(
        v100s(2), workload([job(0, 3000.0), job(1, 3000.0, arrival=10.0)]), policy, WorstFit()
    )
    rec = {r.job_id: r for r in res.records}
    assert rec[1].start_s == pytest.approx(360.0)
    assert policy.calls[:2] == [0.0, 360.0]


def test_resolve_rate_limited():
    # The first change after the run's first solve re-solves at once (Gavel's "last reset
    # still the first"; at t = 1 s as at t = 0 s: a live service's first reset is never
    # at 0.0); after that, completions re-solve at most once per interval.
    jobs = [job(i, 400.0 * (i + 1), arrival=1.0) for i in range(10)]
    policy = FixedPolicy(equal_share)
    run_rounds(v100s(10), workload(jobs), policy, WorstFit(), resolve_interval_s=1920.0)
    assert policy.calls[0] == pytest.approx(1.0) and policy.calls[1] < 1920.0
    gaps = np.diff(policy.calls[1:])
    assert len(gaps) and (gaps >= 1920.0 - 1e-9).all()


def test_an_arrival_after_a_first_solve_off_time_zero_re_solves_at_the_next_boundary():
    # The live service's first solve comes a launch latency after its clock's origin:
    # a job arriving later must not wait a whole resolve interval for its first solve.
    policy = FixedPolicy(equal_share)
    jobs = [job(0, 3000.0, arrival=0.15), job(1, 3000.0, arrival=400.0)]
    res = run_rounds(v100s(2), workload(jobs), policy, WorstFit(), resolve_interval_s=1920.0)
    rec = {r.job_id: r for r in res.records}
    assert policy.calls[0] == pytest.approx(0.15)
    assert rec[1].start_s < 1920.0 and len(policy.calls) >= 2 and policy.calls[1] < 1920.0


def test_fractional_jobs_share_one_gpu():
    jobs = [job(0, 720.0, milli=500), job(1, 720.0, milli=500), job(2, 720.0, milli=600)]
    res = run_rounds(v100s(1), workload(jobs), FixedPolicy(equal_share), WorstFit())
    rec = {r.job_id: r for r in res.records}
    assert rec[0].start_s == 0.0 and rec[1].start_s == 0.0  # 500 + 500 milli on one GPU
    assert res.timeline.allocated_milli[0] == 1000.0
    # Job 2 (600 milli) has received nothing, so it goes first next round; 500 more
    # would not fit beside it, so it runs alone.
    assert rec[2].start_s == pytest.approx(360.0)
    assert res.timeline.allocated_milli[1] == 600.0
    assert all(r.status is JobStatus.COMPLETED for r in res.records)


def test_multi_gpu_job_spans_one_gpu_nodes():
    res = run_rounds(
        v100s(4), workload([job(0, 360.0, gpus=4, span=True)]), FixedPolicy(equal_share), WorstFit()
    )
    (rec,) = res.records
    assert rec.status is JobStatus.COMPLETED and rec.jct_s == pytest.approx(360.0)
    assert res.timeline.allocated_milli[0] == 4000.0
    # A job that may not span (a pod) can never run there.
    pod = run_rounds(
        v100s(4), workload([job(0, 360.0, gpus=4)]), FixedPolicy(equal_share), WorstFit()
    )
    assert pod.records[0].status is JobStatus.REJECTED


def test_same_seed_same_records():
    jobs = [
        job(i, 300.0 + 97.0 * i, arrival=45.0 * i, milli=(300, 500, 1000)[i % 3]) for i in range(30)
    ]

    def once():
        return run_rounds(v100s(3), workload(jobs), FixedPolicy(equal_share), WorstFit(), seed=7)

    assert once().records == once().records


def test_every_job_accounted_for_when_window_stops_early():
    jobs = [job(i, 2000.0, arrival=100.0 * i) for i in range(12)]
    res = run_rounds(v100s(2), workload(jobs, window=(0, 3)), FixedPolicy(equal_share), WorstFit())
    statuses = [r.status for r in res.records]
    assert all(statuses[i] is JobStatus.COMPLETED for i in range(3))
    assert len(res.records) <= 12
    assert set(statuses) <= {JobStatus.COMPLETED, JobStatus.RUNNING, JobStatus.QUEUED}
    assert sum(r.measured for r in res.records) == 3


def test_job_that_never_fits_is_rejected_with_reason():
    res = run_rounds(
        v100s(2, per_node=2),
        workload([job(0, 10.0, gpus=4)]),
        FixedPolicy(equal_share),
        WorstFit(),
        span_nodes=False,
    )
    (rec,) = res.records
    assert rec.status is JobStatus.REJECTED and rec.rejection is RejectReason.NEVER_FITS
    assert rec.reason.startswith("never_fits: no node can ever hold num_gpu=4")


def test_symmetric_fast_path_changes_nothing_observable():
    # One-GPU identical nodes, whole-GPU jobs of 1, 2 and 4 GPUs, time-shared: with or
    # without scoring the free nodes, every job and the timeline come out the same.
    jobs = [
        job(i, 500.0 + 211.0 * i, arrival=30.0 * i, gpus=(1, 2, 4)[i % 3], span=True)
        for i in range(18)
    ]

    def once(fast: bool):
        return run_rounds(
            v100s(6), workload(jobs), FixedPolicy(equal_share), WorstFit(), symmetric_fast_path=fast
        )

    slow, fast = once(False), once(True)
    assert slow.records == fast.records
    np.testing.assert_array_equal(slow.timeline.allocated_milli, fast.timeline.allocated_milli)
    assert fast.leases is not None and slow.leases is not None
    assert fast.leases.fast_placements > 0 and slow.leases.fast_placements == 0


def test_progress_reports_fraction_done_up_to_one():
    seen: list[float] = []
    jobs = [job(i, 400.0 + 100.0 * i, arrival=20.0 * i) for i in range(10)]
    run_rounds(v100s(2), workload(jobs), FixedPolicy(equal_share), WorstFit(), progress=seen.append)
    assert seen and seen[-1] == 1.0 and seen == sorted(seen)


class _RateOnly:
    """Throughputs without ``rate_key``: the simulator asks it per job and model."""

    def __init__(self, table: object) -> None:
        self.table = table
        self.calls = 0

    def rate(self, job: object, gpu: object) -> float:
        self.calls += 1
        return self.table.rate(job, gpu)  # type: ignore[attr-defined]


def test_rates_looked_up_per_key_equal_rates_per_job():
    from dataclasses import replace

    from gpumosaic.workloads.spec import parse_cluster, parse_workload
    from gpumosaic.workloads.workload import Workload

    base = parse_workload("gavel:jobs=30,rate=40,milli=spatial", seed=4).workload
    # Some jobs may use only the V100s: their rates elsewhere are 0 (part of the key).
    jobs = [
        replace(j, allowed_models=frozenset({"V100"})) if j.id % 4 == 0 else j for j in base.jobs
    ]
    cluster = parse_cluster("v100:2,k80:2", gpus_per_node=2)
    plain = _RateOnly(base.throughputs)
    keyed = run_rounds(cluster, Workload("keyed", jobs, base.throughputs), "max_min_fairness_perf")
    per_job = run_rounds(cluster, Workload("per-job", jobs, plain), "max_min_fairness_perf")
    # One call per job and model it may use.
    assert plain.calls == sum(j.allows(m.name) for j in jobs for m in cluster.gpu_models)
    assert keyed.records == per_job.records
    assert any(r.gpu_model == "K80" for r in keyed.records if r.job_id % 4)
    assert all(r.gpu_model in ("V100", "") for r in keyed.records if r.job_id % 4 == 0)
