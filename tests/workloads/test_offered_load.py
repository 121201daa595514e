"""Offered load by hand: the jobs' GPU-hours against the cluster's GPU-hours from the
first arrival to the last job's finish without waiting (load.py's module doc)."""

import pytest

from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.job import JobSpec
from gpumosaic.workloads.load import offered_load
from gpumosaic.workloads.throughputs import ConstantThroughputs
from gpumosaic.workloads.workload import Workload


def jobs(arrivals: list[float], num_gpu: int = 1, milli: int = 1000) -> tuple[JobSpec, ...]:
    return tuple(JobSpec(i, t, "t", num_gpu, milli, 3600.0) for i, t in enumerate(arrivals))


def test_three_one_hour_jobs_over_an_hour_on_four_gpus() -> None:
    # Arrivals 0, 1800, 3600 s, each 1 GPU for 1 h: 3 GPU-h by t = 2 h (the last one's
    # finish), on 4 GPUs: 3 / (4 x 2) = 37.5%.
    load = offered_load(
        Workload("w", jobs([0, 1800, 3600]), ConstantThroughputs()),
        ClusterSpec.from_counts([("v100", 4)]),
    )
    assert load is not None
    assert load.jobs == 3 and load.gpu_hours == pytest.approx(3.0)
    assert load.arrival_span_h == pytest.approx(1.0) and load.horizon_h == pytest.approx(2.0)
    assert load.fraction == pytest.approx(0.375)


def test_a_long_stream_is_rate_times_gpu_hours_per_job() -> None:
    # 2 jobs/h of 1 GPU-hour for 1,000 h on 4 GPUs: the usual figure, 2 x 1 / 4 = 50%.
    load = offered_load(
        Workload("w", jobs([1800.0 * i for i in range(2001)]), ConstantThroughputs()),
        ClusterSpec.from_counts([("v100", 4)]),
    )
    assert load is not None and load.fraction == pytest.approx(0.5, rel=1e-3)


def test_two_jobs_seconds_apart_are_not_a_huge_load() -> None:
    # Issue 28: 2 one-hour jobs 10 s apart were 360 jobs/h, a load of thousands of
    # percent. They ask for 2 GPU-h by 1 h 10 s: on 12 GPUs 17%, on one GPU 200% (one
    # of them must wait: that load is real).
    workload = Workload("w", jobs([0, 10]), ConstantThroughputs())
    twelve = offered_load(workload, ClusterSpec.from_counts([("v100", 12)]))
    one = offered_load(workload, ClusterSpec.from_counts([("v100", 1)]))
    assert twelve is not None and twelve.fraction == pytest.approx(2 / 12 / (3610 / 3600))
    assert one is not None and one.fraction == pytest.approx(2 / (3610 / 3600))


def test_fractional_and_gang_demand() -> None:
    # Half a GPU for an hour, at 0, 1800 and 3600 s: 1.5 GPU-h by 2 h on one GPU = 75%;
    # 4 GPUs for an hour at 0 and 3600 s: 8 GPU-h by 2 h on 8 GPUs = 50%.
    half = offered_load(
        Workload("w", jobs([0, 1800, 3600], milli=500), ConstantThroughputs()),
        ClusterSpec.from_counts([("v100", 1)]),
    )
    assert half is not None and half.fraction == pytest.approx(0.75)
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


@pytest.mark.slow  # a job-by-job reference over a whole trace: seconds of CPU
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


def test_a_stream_is_offered_over_its_arrival_span_and_the_background_counts() -> None:
    """Issue 36: a window stream on openb read 3.8% at 85% utilization (its horizon
    stretched to the sample's longest job), and a 90% background was left out."""
    from dataclasses import replace

    from gpumosaic.workloads.load import offered_load
    from gpumosaic.workloads.spec import parse_cluster, parse_workload

    cluster = parse_cluster("v100:36,p100:36,k80:36", 1)
    stream = offered_load(parse_workload("gavel:rate=3.0,window=4000-5000", 0).workload, cluster)
    assert stream is not None and stream.stream
    assert stream.horizon_h == stream.arrival_span_h
    assert stream.busy_gpus == stream.gpu_hours / stream.arrival_span_h
    # Gavel's 36:36:36 saturates near 3 jobs/h: most of the 108 GPUs are asked for.
    assert 0.5 < stream.fraction < 1.5, stream.line()
    assert "a stream: the arrival span" in stream.line()
    held = replace(stream, background_gpus=0.9 * stream.cluster_gpus)
    assert held.fraction == (stream.busy_gpus + 0.9 * 108) / 108
    assert "held by the background" in held.line() and held.fraction > 1.0
