"""Sharing models inside Gavel's round mechanism."""

import pytest
from rounds_builders import run_rounds

from gpumosaic.model import ClusterSpec, JobSpec
from gpumosaic.sharing.speed import build_speed_model
from gpumosaic.workloads.throughputs import GavelThroughputTable
from gpumosaic.workloads.workload import Workload

TABLE = GavelThroughputTable.load()
A3C = TABLE.isolated("A3C", 1, "v100")
LM = TABLE.isolated("LM (batch size 5)", 1, "v100")


def finishes(jobs: tuple[JobSpec, ...], sharing: str | None) -> dict[int, float]:
    speed = None if sharing is None else build_speed_model(sharing)
    result = run_rounds(
        ClusterSpec.from_counts([("v100", 1)]),
        Workload("w", jobs, TABLE),
        "max_min_fairness",
        "fgd",
        round_s=360.0,
        speed=speed,
    )
    return {r.job_id: r.finish_s for r in result.records}


def test_capped_share_runs_at_its_share() -> None:
    # 720 s of work alone; capped at 500 milli it needs 1440 s: four 360 s rounds.
    job = (JobSpec(0, 0.0, "A3C", 1, 500, A3C * 720),)
    assert finishes(job, None)[0] == pytest.approx(720, abs=1)
    assert finishes(job, "capped")[0] == pytest.approx(1440, abs=1)


def test_measured_pair_on_one_gpu_slows_both() -> None:
    jobs = (
        JobSpec(0, 0.0, "A3C", 1, 500, A3C * 720),
        JobSpec(1, 0.0, "LM (batch size 5)", 1, 500, LM * 720),
    )
    ideal = finishes(jobs, None)
    measured = finishes(jobs, "measured")
    assert ideal == pytest.approx({0: 720, 1: 720}, abs=1)
    # Gavel's pair rates: each job keeps about half its speed beside the other.
    assert all(measured[j] > 1.5 * ideal[j] for j in (0, 1))


def test_nvshare_time_shares_whole_gpu_jobs() -> None:
    # Two whole-GPU jobs that spend half their time on the CPU, 4 GiB working sets.
    jobs = tuple(
        JobSpec(i, 0.0, "A3C", 1, 1000, A3C * 720, gpu_memory_mib=4096, gpu_time_fraction=0.5)
        for i in range(2)
    )
    # Without sharing, max-min fairness alternates them round by round: both near 1440 s.
    alone = finishes(jobs, None)
    assert sorted(alone.values()) == pytest.approx([1440, 1440], abs=2)
    # nvshare lets both hold a 500-milli time share: one's CPU phases overlap the other's
    # GPU phases, so both finish well before 1440 s, and not before 720 s.
    shared = finishes(jobs, "nvshare:tq=30")
    assert all(720 < t < 0.9 * 1440 for t in shared.values())
