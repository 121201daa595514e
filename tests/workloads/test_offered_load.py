"""Offered load by hand: arrival rate x GPU-hours per job against the cluster's GPUs."""

import pytest

from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.job import JobSpec
from gpumosaic.workloads.load import offered_load
from gpumosaic.workloads.throughputs import ConstantThroughputs
from gpumosaic.workloads.workload import Workload


def jobs(arrivals: list[float], num_gpu: int = 1, milli: int = 1000) -> tuple[JobSpec, ...]:
    return tuple(JobSpec(i, t, "t", num_gpu, milli, 3600.0) for i, t in enumerate(arrivals))


def test_two_jobs_per_hour_of_one_gpu_hour_on_four_gpus_is_half_load() -> None:
    # Arrivals 0, 1800, 3600 s: 2 gaps in an hour = 2 jobs/h; each 1 GPU for 1 h.
    load = offered_load(
        Workload("w", jobs([0, 1800, 3600]), ConstantThroughputs()),
        ClusterSpec.from_counts([("v100", 4)]),
    )
    assert load is not None
    assert load.jobs_per_hour == pytest.approx(2.0)
    assert load.gpu_hours_per_job == pytest.approx(1.0)
    assert load.fraction == pytest.approx(0.5)


def test_fractional_and_gang_demand() -> None:
    # 2 jobs/h of half a GPU for an hour fill one GPU; 1 job/h of 4 GPUs fills four.
    half = offered_load(
        Workload("w", jobs([0, 1800, 3600], milli=500), ConstantThroughputs()),
        ClusterSpec.from_counts([("v100", 1)]),
    )
    assert half is not None and half.fraction == pytest.approx(1.0)
    gang = offered_load(
        Workload("w", jobs([0, 3600], num_gpu=4), ConstantThroughputs()),
        ClusterSpec.from_counts([("v100", 8)]),
    )
    assert gang is not None and gang.fraction == pytest.approx(0.5)


def test_a_batch_at_time_zero_has_no_rate() -> None:
    workload = Workload("w", jobs([0, 0, 0]), ConstantThroughputs())
    assert offered_load(workload, ClusterSpec.from_counts([("v100", 4)])) is None
