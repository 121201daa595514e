"""Gavel's policy on the openb cluster: the borrowed rates and a short end-to-end run."""

from __future__ import annotations

import pytest

from gpumosaic.experiments.reproductions.gavel_openb import (
    OpenbRun,
    openb_workload,
    run_openb,
    summarize_seeds,
)
from gpumosaic.model.gpu import gpu_model
from gpumosaic.model.job import JobSpec
from gpumosaic.workloads.spec import parse_workload
from gpumosaic.workloads.throughputs import GavelThroughputTable


def test_models_without_gavel_rates_borrow_the_documented_ones() -> None:
    table = GavelThroughputTable.load()
    rates = parse_workload("gavel:rate=860,window=0-2,milli=spatial", 0).workload.throughputs
    job = JobSpec(
        id=0, arrival_s=0.0, job_type=table.job_types[0], num_gpu=1, gpu_milli=500, work=1.0
    )
    v100 = table.isolated(job.job_type, 1, "v100")
    p100 = table.isolated(job.job_type, 1, "p100")
    assert rates.rate(job, gpu_model("G2")) == pytest.approx(v100)
    assert rates.rate(job, gpu_model("G3")) == pytest.approx(1.5 * v100)
    assert rates.rate(job, gpu_model("T4")) == pytest.approx(p100)
    assert rates.rate(job, gpu_model("V100")) == pytest.approx(v100)  # measured: unchanged
    # borrow=off: an unmeasured model has no rate (the mechanism gives it no work).
    plain = parse_workload("gavel:rate=860,window=0-2,borrow=off", 0).workload.throughputs
    with pytest.raises(KeyError):
        plain.rate(job, gpu_model("G3"))
    assert plain.rate(job, gpu_model("V100")) == pytest.approx(v100)


def test_a_short_window_runs_and_reports_bounded_figures() -> None:
    workload = openb_workload(120.0, (0, 2), seed=0)
    assert workload.measure == (0, 2)
    run = run_openb("strided", 120.0, (0, 2), seed=0)
    assert run.completed == 2
    assert 0.0 < run.utilization <= 1.0
    assert 0.0 <= run.fragmentation_rate <= 1.0
    assert run.rounds > 0 and run.policy_solves > 0
    # Two small jobs on 6,212 GPUs: every placement the milli counts admit finds GPUs.
    assert run.placement_failures == 0


def _run(placement: str, rate: float, seed: int, jct: float, failures: int) -> OpenbRun:
    return OpenbRun(
        placement=placement,
        rate_per_hour=rate,
        seed=seed,
        avg_jct_h=jct,
        completed=10,
        utilization=0.5,
        fragmentation_rate=0.1 * seed,
        rounds=5,
        policy_solves=1,
        policy_solve_s=0.0,
        elapsed_s=1.0,
        placement_failures=failures,
    )


def test_seeds_are_summarized_per_point_with_their_range() -> None:
    runs = [
        _run("strided", 360.0, 0, 13.0, 100),
        _run("strided", 360.0, 1, 14.0, 300),
        _run("fgd", 360.0, 0, 12.0, 50),
        _run("strided", 360.0, 2, 15.0, 200),
    ]
    strided, fgd = summarize_seeds(runs)
    assert (strided.placement, strided.seeds) == ("strided", (0, 1, 2))
    assert strided.avg_jct_h == pytest.approx((14.0, 13.0, 15.0))
    assert strided.placement_failures == pytest.approx((200.0, 100.0, 300.0))
    assert strided.fragmentation_rate == pytest.approx((0.1, 0.0, 0.2))
    assert fgd.seeds == (0,) and fgd.avg_jct_h == pytest.approx((12.0, 12.0, 12.0))
