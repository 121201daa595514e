"""Fairness metrics by hand: slowdown, finish-time fairness rho, Jain's index."""

import math

import numpy as np
import pytest

from gpumosaic.results.fairness import fairness, mean_contention
from gpumosaic.results.result import JobRecord, JobStatus


def job(
    job_id: int, arrival: float, finish: float, alone: float, num_gpu: int = 1, milli: int = 1000
) -> JobRecord:
    done = not math.isnan(finish)
    return JobRecord(
        job_id,
        f"j{job_id}",
        "t",
        arrival,
        arrival if done else math.nan,
        finish,
        num_gpu,
        milli,
        JobStatus.COMPLETED if done else JobStatus.QUEUED,
        alone_s=alone,
    )


def test_mean_contention_of_overlapping_jobs() -> None:
    # Job A is there 0..10, job B 5..20: N(t) = 1 on 0..5, 2 on 5..10, 1 on 10..20.
    arrival = np.array([0.0, 5.0])
    finish = np.array([10.0, 20.0])
    mean = mean_contention(arrival, finish, 20.0, arrival, finish)
    assert mean[0] == pytest.approx((5 * 1 + 5 * 2) / 10)  # 1.5
    assert mean[1] == pytest.approx((5 * 2 + 10 * 1) / 15)  # 4/3


def test_unfinished_jobs_count_as_present_until_the_end() -> None:
    arrival = np.array([0.0, 0.0])
    finish = np.array([10.0, np.nan])
    mean = mean_contention(arrival, finish, 50.0, arrival[:1], finish[:1])
    assert mean[0] == pytest.approx(2.0)


def test_rho_against_an_equal_share_of_a_one_gpu_cluster() -> None:
    # One GPU. A (alone 10 s) runs 0..10; B (alone 10 s) arrives at 0 and waits: 10..20.
    records = (job(0, 0, 10, 10), job(1, 0, 20, 10))
    f = fairness(records, total_gpu_milli=1000, end_s=20)
    # Contention: A sees 2 jobs on 0..10 -> n = 2, T_fair = 10 * max(1, 2 * 1 / 1) = 20,
    # rho_A = 10 / 20 = 0.5. B sees 2 on 0..10 and 1 on 10..20 -> n = 1.5, T_fair = 15,
    # rho_B = 20 / 15.
    assert f.ftf_rho_max == pytest.approx(20 / 15)
    assert f.ftf_rho_mean == pytest.approx((0.5 + 20 / 15) / 2)
    # Slowdowns 1 and 2: progress 1 and 0.5, Jain = 1.5^2 / (2 * 1.25) = 0.9.
    assert f.slowdown_max == pytest.approx(2.0)
    assert f.jain_index == pytest.approx(0.9)


def test_a_small_job_on_a_big_cluster_is_never_owed_more_than_running_alone() -> None:
    # 8 GPUs, 2 one-GPU jobs at once: each share (4 GPUs) covers its need: T_fair = alone.
    records = (job(0, 0, 10, 10), job(1, 0, 10, 10))
    f = fairness(records, total_gpu_milli=8000, end_s=10)
    assert f.ftf_rho_max == pytest.approx(1.0) and f.jain_index == pytest.approx(1.0)


def test_fractional_demand_counts_milli() -> None:
    # Two 500-milli jobs on one GPU at once, each slowed 2x: n = 2, g = 0.5, C = 1:
    # T_fair = alone * max(1, 2 * 0.5 / 1) = alone -> rho = 2.
    records = (job(0, 0, 20, 10, milli=500), job(1, 0, 20, 10, milli=500))
    assert fairness(records, 1000, 20).ftf_rho_mean == pytest.approx(2.0)


def test_no_completed_job_gives_nan() -> None:
    f = fairness((job(0, 0, math.nan, 10),), 1000, 5.0)
    assert math.isnan(f.ftf_rho_mean) and math.isnan(f.jain_index)
