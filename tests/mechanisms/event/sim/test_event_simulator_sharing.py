"""Sharing models inside the event simulator: speeds change as co-location changes."""

import pytest
from sim_builders import cluster, job, node, simulate, workload

from gpumosaic.errors import InputError
from gpumosaic.model import JobSpec
from gpumosaic.sharing.speed import build_speed_model
from gpumosaic.workloads.throughputs import GavelThroughputTable
from gpumosaic.workloads.workload import Workload

TABLE = GavelThroughputTable.load()


def test_measured_pair_slows_both_jobs_then_the_survivor_speeds_up() -> None:
    a = TABLE.isolated("A3C", 1, "v100")
    b = TABLE.isolated("LM (batch size 5)", 1, "v100")
    pair_a, pair_b = TABLE.packed("A3C", 1, "LM (batch size 5)", 1, "v100")  # type: ignore[misc]
    # 100 s of work each alone; A3C gets 100 s of LM for company and then some alone.
    jobs = (
        JobSpec(0, 0, "A3C", 1, 500, a * 100),
        JobSpec(1, 0, "LM (batch size 5)", 1, 500, b * 50),
    )
    result = simulate(
        cluster(node("n0")),
        Workload("pair", jobs, TABLE),
        "fgd",
        speed=build_speed_model("measured"),
    )
    finish = {r.job_id: r.finish_s for r in result.records}
    # LM runs at pair_b/b of its speed until it is done: 50 / (pair_b / b) seconds.
    lm_done = 50 / (pair_b / b)
    assert finish[1] == pytest.approx(lm_done)
    # A3C did lm_done * pair_a/a of its 100 s by then, the rest alone at full speed.
    assert finish[0] == pytest.approx(lm_done + (100 - lm_done * pair_a / a))


def test_parametric_model_matches_ideal_when_shares_fit() -> None:
    jobs = [job(i, arrival=3.0 * i, duration=20 + i, milli=300) for i in range(9)]
    ideal = simulate(cluster(node("n0"), node("n1")), workload(jobs), "fgd")
    parametric = simulate(
        cluster(node("n0"), node("n1")),
        workload(jobs),
        "fgd",
        speed=build_speed_model("parametric"),
    )
    assert [r.finish_s for r in ideal.records] == pytest.approx(
        [r.finish_s for r in parametric.records]
    )


def test_nvshare_admits_whole_gpu_jobs_as_time_shares() -> None:
    jobs = [job(i, duration=100, milli=1000) for i in range(4)]
    result = simulate(
        cluster(node("n0"), node("n1")),
        workload(jobs),
        "best-fit",
        speed=build_speed_model("nvshare:tq=30,jobs_per_gpu=2"),
    )
    # All four start at once, two per GPU, each holding a 500-milli time share...
    assert all(r.start_s == 0 and r.gpu_milli == 500 for r in result.records)
    # ...and, GPU-bound and sharing, each takes longer than alone but less than serial.
    for r in result.records:
        assert 100 < r.finish_s <= 205


@pytest.mark.parametrize("spec", ["nvshare:tq=-1", "nvshare:colour=blue", "magic"])
def test_bad_sharing_specs_are_user_errors(spec: str) -> None:
    with pytest.raises(InputError):
        build_speed_model(spec)


def test_capped_shares_run_at_their_share_of_the_gpu() -> None:
    # 30 s of work alone at 300 milli: 30 / 0.3 = 100 s; the whole-GPU job is unaffected.
    jobs = [job(0, duration=30, milli=300), job(1, duration=30, milli=1000)]
    result = simulate(
        cluster(node("n0"), node("n1")), workload(jobs), "fgd", speed=build_speed_model("capped")
    )
    assert {r.job_id: r.finish_s for r in result.records} == pytest.approx({0: 100.0, 1: 30.0})


def test_nvshare_charges_thrashing_or_handovers_to_the_jobs() -> None:
    from dataclasses import replace

    # Two GPU-heavy jobs with 10 GiB working sets share one 16 GiB V100.
    jobs = [
        replace(job(i, duration=600), gpu_memory_mib=10_240, gpu_time_fraction=0.9) for i in (0, 1)
    ]

    def run(spec: str) -> list:  # type: ignore[type-arg]
        return list(
            simulate(
                cluster(node("n0")), workload(jobs), "best-fit", speed=build_speed_model(spec)
            ).records
        )

    off = run("nvshare:tq=30,anti_thrashing=off")
    on = run("nvshare:tq=30,anti_thrashing=on")
    assert all(r.thrashing_s > 0 and r.handovers == 0 for r in off)
    assert all(r.thrashing_s == 0 and r.handovers > 0 and r.suspended_s > 0 for r in on)
    # Serializing with a quantum beats thrashing by a wide margin (nvshare's point).
    assert max(r.finish_s for r in on) < 0.5 * max(r.finish_s for r in off)
