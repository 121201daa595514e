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


def reference_gpu_hours(job: JobSpec, workload: Workload, cluster: ClusterSpec) -> float | None:
    """One job at a time with ``np.average``: what the grouped computation must equal."""
    import numpy as np

    by_name = {node.gpu.name: node.gpu for node in cluster.nodes}
    durations, weights = [], []
    for name, count in cluster.gpus_per_model().items():
        try:
            rate = workload.throughputs.rate(job, by_name[name])
        except KeyError:
            continue
        if rate > 0 and job.allows(name):
            durations.append(job.work / rate)
            weights.append(count)
    if not durations:
        return None
    return (
        job.num_gpu
        * job.gpu_milli
        / 1000
        * (float(np.average(durations, weights=weights)) / 3600.0)
    )


def test_grouped_gpu_hours_equal_np_average_job_by_job_bit_for_bit() -> None:
    import numpy as np

    from gpumosaic.traces.openb import load_openb_nodes, load_openb_tasks
    from gpumosaic.workloads.load import _gpu_hours

    cluster = load_openb_nodes("openb:gpu")
    tasks = load_openb_tasks("openb:default")
    rng = np.random.default_rng(5)
    # The packaged pods (GPU models constrained or not) and odd durations over all models.
    constraints = [None, frozenset({"T4", "G2"}), frozenset({"V100M16"}), frozenset({"H100"})]
    extra = [
        JobSpec(10**6 + i, 0.0, "t", 1, 500, float(rng.random() * 1e5), allowed_models=models)
        for i in range(200)
        for models in [constraints[i % len(constraints)]]
    ]
    jobs = [*tasks, *extra]
    workload = Workload("w", tuple(jobs), ConstantThroughputs(steps_per_s=0.37))
    counts = cluster.gpus_per_model()
    by_name = {node.gpu.name: node.gpu for node in cluster.nodes}
    got = _gpu_hours(jobs, workload, counts, by_name)
    assert got == [reference_gpu_hours(job, workload, cluster) for job in jobs]
    assert got.count(None) == 50  # H100: no such model in the cluster
