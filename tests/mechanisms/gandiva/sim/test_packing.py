"""Introspective packing: a pair that beats time-slicing is kept, one that does not is undone.

One V100, quantum 60 s, hand-over 1 s, trial 60 s. Every job runs 1 step/s alone; the
hand-made table (gandiva_builders.pair_table) says a "good" pair keeps 0.8 each (sum 1.6)
and a "bad" pair 0.4 each (sum 0.8, worse than time-slicing's 1).
"""

from __future__ import annotations

import pytest
from gandiva_builders import BAD, GOOD, job, run_named, table_workload, v100s

from gpumosaic.mechanisms.gandiva.rates import RateModel
from gpumosaic.model import gpu_model
from gpumosaic.results.result import JobStatus, SimResult
from gpumosaic.workloads.throughputs import GavelThroughputTable


def run(jobs: list, **kw: object) -> SimResult:
    return run_named(
        v100s(1, 1),
        table_workload(jobs),
        quantum_s=60.0,
        switch_s=1.0,
        profile_s=60.0,
        check_invariants=True,
        **kw,  # type: ignore[arg-type]
    )


def finish(result: SimResult) -> dict[int, float]:
    assert all(r.status is JobStatus.COMPLETED for r in result.records)
    return {r.job_id: r.finish_s for r in result.records}


def test_good_pair_is_kept() -> None:
    # A and B (good, 100 steps) at t=0. B oversubscribes A's GPU and, waiting, is packed
    # beside A at once; B's state comes onto the GPU: 0-1 idle.
    #   pair 1-61 on trial: 0.8 x 60 = 48 steps each; verdict 0.8 + 0.8 = 1.6 > 1: keep
    #   52 steps left each at 0.8/s: 65 s more, both done at 126 (time-slicing: 162, 203)
    result = run([job(0, 100, job_type=GOOD), job(1, 100, job_type=GOOD)])
    assert finish(result) == pytest.approx({0: 126.0, 1: 126.0})
    extra = result.gandiva
    assert (extra.packs_tried, extra.packs_kept, extra.packs_undone) == (1, 1, 0)
    # Packed, each job holds half the GPU: 500 milli x 125 s.
    assert [r.gpu_milli_seconds for r in result.records] == pytest.approx([62_500, 62_500])
    assert extra.effective_gpu_s == pytest.approx(1.6 * 125)


def test_bad_pair_is_undone_and_not_retried() -> None:
    # Declared GPU time 0.3 each: the utilization proxy says they fit (0.6 <= 1), so the
    # pair is tried; it runs 1-61 at 0.4 each (24 steps), verdict 0.8 <= 1: undo. B becomes
    # its own unit again; A's quantum (60 s from t=0) is over, so B gets the GPU at once:
    #   switch 61-62, B 62-122 (84), switch, A 123-183 (84), switch, B 184-200 (done 200),
    #   switch 200-201, A 201-217 (done 217). The pair is never tried again.
    jobs = [job(0, 100, job_type=BAD, gpu_time=0.3), job(1, 100, job_type=BAD, gpu_time=0.3)]
    result = run(jobs)
    assert finish(result) == pytest.approx({0: 217.0, 1: 200.0})
    extra = result.gandiva
    assert (extra.packs_tried, extra.packs_kept, extra.packs_undone) == (1, 0, 1)


def test_undo_without_time_slicing_sends_the_guest_back_to_the_queue() -> None:
    # No time-slicing: B queues, is packed beside A (1-61 at 0.4), undone at 61 and waits
    # for A to finish: A has 76 steps left alone, done at 137; B then runs 76 steps: 213.
    jobs = [job(0, 100, job_type=BAD, gpu_time=0.3), job(1, 100, job_type=BAD, gpu_time=0.3)]
    result = run(jobs, time_slicing=False)
    assert finish(result) == pytest.approx({0: 137.0, 1: 213.0})
    assert result.gandiva.packs_undone == 1


def test_pairs_that_do_not_fit_in_gpu_memory_are_not_packed() -> None:
    # 10 GiB working sets each on a 16 GiB V100: time-slicing only (the hand-worked 162/203).
    jobs = [job(0, 100, job_type=GOOD, memory=10_240), job(1, 100, job_type=GOOD, memory=10_240)]
    result = run(jobs)
    assert finish(result) == pytest.approx({0: 162.0, 1: 203.0})
    assert result.gandiva.packs_tried == 0


def test_packing_off_time_slices() -> None:
    result = run([job(0, 100, job_type=GOOD), job(1, 100, job_type=GOOD)], packing=False)
    assert finish(result) == pytest.approx({0: 162.0, 1: 203.0})


def test_utilization_proxy_from_gavel_table() -> None:
    # ResNet-18 at batch 16 keeps most of its speed beside anyone (low utilization);
    # ResNet-50 at batch 128 loses far more (it needs the whole GPU).
    rates = RateModel(GavelThroughputTable.load())
    v100 = gpu_model("v100")
    light = rates.utilization(job(0, 1, job_type="ResNet-18 (batch size 16)"), v100)
    heavy = rates.utilization(job(1, 1, job_type="ResNet-50 (batch size 128)"), v100)
    assert 0.0 < light < 0.2 < heavy <= 1.0
