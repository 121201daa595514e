import numpy as np
import pytest

from gpumosaic.model.job import JobSpec
from gpumosaic.workloads.gavel import (
    SCALE_FACTORS,
    SPATIAL_MILLI_MIX,
    GavelGenerator,
    GavelWorkloadConfig,
)
from gpumosaic.workloads.throughputs import GavelThroughputTable

TABLE = GavelThroughputTable.load()


def generate(n: int, seed: int = 0, **kwargs: object) -> list:  # type: ignore[type-arg]
    return GavelGenerator(GavelWorkloadConfig(jobs=n, **kwargs), TABLE, seed).sample(n)  # type: ignore[arg-type]


def test_same_seed_same_jobs_and_reiteration_restarts() -> None:
    generator = GavelGenerator(GavelWorkloadConfig(jobs=20, rate_per_hour=3), TABLE, 7)
    assert list(generator) == list(generator)
    assert generate(20, seed=7, rate_per_hour=3) == list(generator)
    assert generate(20, seed=8, rate_per_hour=3) != list(generator)


def test_durations_and_arrivals_follow_gavels_distributions() -> None:
    jobs = generate(4000, rate_per_hour=4.0)
    durations = np.array([j.work / TABLE.isolated(j.job_type, 1, "v100") for j in jobs])
    minutes = durations / 60
    # 80% of jobs in 10^[1.5, 3] minutes, 20% in 10^[3, 4].
    assert minutes.min() >= 10**1.5 - 1e-6 and minutes.max() <= 10**4 + 1e-6
    assert abs((minutes > 1000).mean() - 0.2) < 0.03
    gaps = np.diff([j.arrival_s for j in jobs])
    assert abs(gaps.mean() - 900) < 60  # 3600 / 4 jobs per hour
    assert len({j.job_type for j in jobs}) == 26


def test_static_workload_and_spatial_mix() -> None:
    jobs = generate(5000, spatial_milli=True)
    assert all(j.arrival_s == 0 for j in jobs)
    shares = np.array([j.gpu_milli for j in jobs])
    for milli, expected in ((200, 0.2), (300, 0.2), (500, 0.25), (700, 0.15), (1000, 0.2)):
        assert abs((shares == milli).mean() - expected) < 0.03


def test_multigpu_scale_factors() -> None:
    jobs = generate(4000, multigpu=True, spatial_milli=True)
    scales = np.array([j.num_gpu for j in jobs])
    assert set(scales) <= {1, 2, 4, 8}
    # Types without multi-GPU measurements (Gavel's non-distributed jobs) stay at 1.
    distributed = np.array([TABLE.has(j.job_type, 2, "v100") for j in jobs])
    assert distributed.mean() < 1
    assert not (scales[~distributed] > 1).any()
    assert abs((scales[distributed] == 1).mean() - 0.70) < 0.04
    assert abs((scales[distributed] == 4).mean() - 0.15) < 0.03
    # Multi-GPU jobs always ask for whole GPUs.
    assert all(j.gpu_milli == 1000 for j in jobs if j.num_gpu > 1)


def one_draw_per_job(config: GavelWorkloadConfig, seed: int, n: int) -> list[JobSpec]:
    """The generator's process one job and one draw at a time (its definition)."""
    streams = np.random.SeedSequence(seed).spawn(5)
    type_rng, duration_rng, scale_rng, arrival_rng, milli_rng = (
        np.random.default_rng(s) for s in streams
    )
    scale_values = np.array([s for s, _ in SCALE_FACTORS])
    scale_probs = np.array([p for _, p in SCALE_FACTORS])
    milli_values = np.array([m for m, _ in SPATIAL_MILLI_MIX])
    milli_probs = np.array([p for _, p in SPATIAL_MILLI_MIX])
    arrival = 0.0
    jobs = []
    for job_id in range(n):
        if config.rate_per_hour > 0 and job_id > 0:
            arrival += float(arrival_rng.exponential(3600.0 / config.rate_per_hour))
        job_type = TABLE.job_types[int(type_rng.integers(len(TABLE.job_types)))]
        if duration_rng.random() < 0.8:
            duration = 60.0 * 10 ** duration_rng.uniform(1.5, 3.0)
        else:
            duration = 60.0 * 10 ** duration_rng.uniform(3.0, 4.0)
        scale = int(scale_rng.choice(scale_values, p=scale_probs)) if config.multigpu else 1
        if not TABLE.has(job_type, scale, "v100"):
            scale = 1
        milli = 1000
        if config.spatial_milli and scale == 1:
            milli = int(milli_rng.choice(milli_values, p=milli_probs))
        steps = duration * TABLE.isolated(job_type, scale, "v100")
        jobs.append(
            JobSpec(job_id, arrival, job_type, scale, milli, steps, name=f"job{job_id}",
                    may_span_nodes=True)
        )  # fmt: skip
    return jobs


@pytest.mark.parametrize(
    "config",
    [
        GavelWorkloadConfig(jobs=700, rate_per_hour=860, multigpu=True, spatial_milli=True),
        GavelWorkloadConfig(jobs=700, rate_per_hour=3),
        GavelWorkloadConfig(jobs=700, spatial_milli=True),
        GavelWorkloadConfig(window=(10, 20), rate_per_hour=5, multigpu=True),
    ],
)
@pytest.mark.parametrize("chunk", [1, 64, 4096])
def test_bulk_draws_give_the_one_draw_per_job_stream(
    config: GavelWorkloadConfig, chunk: int
) -> None:
    """Drawn in chunks, the jobs are bit for bit those of one draw per job, whatever the
    chunk size (each quantity's stream is consumed in the same order)."""
    generator = GavelGenerator(config, TABLE, 3, chunk=chunk)
    assert generator.sample(700) == one_draw_per_job(config, 3, 700)
    if config.jobs is not None:
        assert len(list(generator)) == config.jobs
