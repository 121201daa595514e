import numpy as np

from gpumosaic.workloads.gavel import GavelGenerator, GavelWorkloadConfig
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
