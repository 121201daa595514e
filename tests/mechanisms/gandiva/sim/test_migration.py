"""Migration to defragment, and conservation of jobs and GPU time under every mechanism,
queue order and placement."""

from __future__ import annotations

import pytest
from gandiva_builders import BAD, GOOD, constant_workload, job, run_named, table_workload, v100s
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpumosaic.mechanisms.gandiva.migration import (
    DefragPlan,
    GroupSlots,
    Move,
    NodeSlots,
    plan_defrag,
)
from gpumosaic.model import ClusterSpec
from gpumosaic.results.result import JobStatus
from gpumosaic.workloads.throughputs import GavelThroughputTable
from gpumosaic.workloads.workload import Workload


def test_planner_moves_the_fewest_jobs() -> None:
    # Two 4-GPU servers, 2 free on each. Freeing node 0 means evicting two 1-GPU sets
    # (1 + 3 time-sliced jobs = 4 jobs); freeing node 1 means one 2-GPU set with 1 job,
    # which fits in node 0's 2 free GPUs. Node 1 wins.
    nodes = [NodeSlots(0, "V100", 4, 2), NodeSlots(1, "V100", 4, 2)]
    groups = [GroupSlots(0, 0, 1, 1), GroupSlots(1, 0, 1, 3), GroupSlots(2, 1, 2, 1)]
    assert plan_defrag(nodes, groups, 4, {0, 1}) == DefragPlan(1, (Move(2, 0),), 1, 2)


def test_planner_stays_within_a_gpu_model_and_gives_up_when_nothing_fits() -> None:
    # The only free GPUs besides node 0's are on a K80 server: a V100 set may not go there.
    nodes = [NodeSlots(0, "V100", 4, 2), NodeSlots(1, "K80", 4, 4)]
    groups = [GroupSlots(0, 0, 2, 1)]
    assert plan_defrag(nodes, groups, 4, {0}) is None


def scattered_jobs() -> list:
    # Six 1-GPU jobs at t=0 fill one server (4) and half of the other (2); two short ones
    # on the full server finish at t=10, leaving 2 free GPUs on each server. A 4-GPU job
    # arrives at t=20 and finds no server with 4 free GPUs.
    long_jobs = [job(i, 1000) for i in (0, 3, 4, 5)]
    short = [job(1, 10), job(2, 10)]
    big = job(6, 100, arrival=20.0, k=4)
    return sorted([*long_jobs, *short, big], key=lambda j: (j.arrival_s, j.id))


def test_migration_consolidates_free_gpus_for_a_multi_gpu_job() -> None:
    workload = constant_workload(scattered_jobs())
    result = run_named(v100s(2, 4), workload, migration_cost_s=30.0, check_invariants=True)
    records = {r.job_id: r for r in result.records}
    assert records[6].start_s == pytest.approx(20.0)
    assert records[6].finish_s == pytest.approx(120.0)
    moved = [r for r in result.records if r.migrations]
    assert len(moved) == 2 and all(r.migrations == 1 for r in moved)
    # A migrated job loses 30 s of progress: it finishes at 1030 instead of 1000.
    assert all(r.finish_s == pytest.approx(1030.0) for r in moved)
    assert result.gandiva.migrations == 2


def test_without_migration_the_multi_gpu_job_waits_for_a_whole_server() -> None:
    result = run_named(
        v100s(2, 4), constant_workload(scattered_jobs()), migration=False, check_invariants=True
    )
    records = {r.job_id: r for r in result.records}
    assert records[6].start_s == pytest.approx(1000.0)
    assert all(r.migrations == 0 for r in result.records)


job_shapes = st.tuples(
    st.sampled_from([1, 1, 1, 2, 4]),  # GPUs
    st.floats(1.0, 400.0),  # work (steps = seconds alone)
    st.floats(0.0, 300.0),  # arrival
    st.sampled_from([GOOD, BAD]),
    st.sampled_from([1.0, 0.3]),  # declared GPU time fraction (utilization proxy)
    st.sampled_from([1.0, 2.0]),  # priority weight
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shapes=st.lists(job_shapes, min_size=1, max_size=10),
    packing=st.booleans(),
    migration=st.booleans(),
    time_slicing=st.booleans(),
    seed=st.integers(0, 3),
    order=st.sampled_from(["fifo", "sjf", "priority"]),
    placement=st.sampled_from([None, "bestfit", "strided", "fgd", "random"]),
)
def test_jobs_and_gpu_time_are_conserved(
    shapes: list[tuple[int, float, float, str, float, float]],
    packing: bool,
    migration: bool,
    time_slicing: bool,
    seed: int,
    order: str,
    placement: str | None,
) -> None:
    ordered = sorted(shapes, key=lambda s: s[2])
    jobs = [
        job(i, work, arrival=t, k=k, job_type=kind, gpu_time=frac, priority=weight)
        for i, (k, work, t, kind, frac, weight) in enumerate(ordered)
    ]
    result = run_named(
        v100s(2, 4),
        table_workload(jobs),
        seed=seed,
        packing=packing,
        migration=migration,
        time_slicing=time_slicing,
        quantum_s=20.0,
        migration_cost_s=5.0,
        profile_s=10.0,
        check_invariants=True,  # ClusterState, groups and jobs agree after every event
        order=order,
        placement=placement,
    )
    extra = result.gandiva
    # Every job that arrived ends completed, with all of its work done.
    assert len(result.records) == len(jobs)
    assert all(r.status is JobStatus.COMPLETED for r in result.records)
    assert extra.max_progress_residual < 1e-6
    # No job runs faster than alone; nothing finishes before it arrives.
    for r in result.records:
        assert r.finish_s - r.arrival_s >= r.alone_s * (1 - 1e-9)
        # Suspended time is the rest of the job's life after its running time; without
        # packing a job holds k whole GPUs whenever it runs, so its GPU-seconds (summed by
        # the groups as it runs) give the running time independently of the records.
        assert r.suspended_s <= r.finish_s - r.start_s + 1e-9
        if not packing:
            running_s = r.gpu_milli_seconds / (1000 * max(1, r.num_gpu))
            assert running_s + r.suspended_s == pytest.approx(
                r.finish_s - r.start_s, rel=1e-9, abs=1e-6
            )
    # GPU time: what the jobs held adds up to the busy GPU-seconds, and busy + switching
    # and migration overhead is exactly what ClusterState says was held.
    held_by_jobs = sum(r.gpu_milli_seconds for r in result.records) / 1000
    assert held_by_jobs == pytest.approx(extra.busy_gpu_s, rel=1e-9, abs=1e-6)
    assert extra.busy_gpu_s + extra.overhead_gpu_s == pytest.approx(
        extra.held_gpu_s, rel=1e-9, abs=1e-6
    )
    assert extra.held_gpu_s <= 8 * result.end_s + 1e-6
    assert extra.max_memory_pressure <= 1.0  # only pairs that fit are ever packed
    # Per job: alone time x GPUs = its GPU-seconds at full speed; packing can only stretch.
    for r in result.records:
        assert r.gpu_milli_seconds / 1000 >= r.num_gpu * r.alone_s * 0.5 * (1 - 1e-9)


def test_a_job_type_without_throughputs_is_rejected_with_a_reason() -> None:
    result = run_named(v100s(1, 4), table_workload([job(0, 10.0, job_type="unknown")]))
    [record] = result.records
    assert record.status is JobStatus.REJECTED
    assert record.reason.startswith("no_throughput")


def test_a_gpu_model_where_the_job_runs_at_speed_0_is_never_used() -> None:
    # Gavel's table gives speed 0 where a job does not fit (ResNet-50 at batch 128 on two
    # K80s). Placed there, a job would never finish (its first placement divided by 0).
    table = GavelThroughputTable({"v100": {("z", 1): 1.0}, "k80": {("z", 1): 0.0}}, {}, "zero")
    cluster = ClusterSpec.from_counts([("v100", 4), ("k80", 4)], gpus_per_node=4)
    for seed in range(6):  # the seeded server order puts the K80 server first for some
        workload = Workload("zero", [job(0, 10.0, job_type="z")], table)
        [record] = run_named(cluster, workload, seed=seed).records
        assert (record.status, record.gpu_model) == (JobStatus.COMPLETED, "V100")
    k80_only = ClusterSpec.from_counts([("k80", 4)], gpus_per_node=4)
    workload = Workload("zero", [job(0, 10.0, job_type="z")], table)
    [record] = run_named(k80_only, workload).records
    assert record.status is JobStatus.REJECTED and record.reason.startswith("no_throughput")


def test_same_seed_same_run() -> None:
    kinds = (GOOD, BAD)
    jobs = [
        job(i, 50.0 + 37 * i, arrival=5.0 * i, k=(1, 2, 1, 4)[i % 4], job_type=kinds[i % 2])
        for i in range(10)
    ]
    first = run_named(v100s(2, 4), table_workload(jobs), seed=7)
    again = run_named(v100s(2, 4), table_workload(jobs), seed=7)
    assert first.records == again.records
    assert first.gandiva == again.gandiva
