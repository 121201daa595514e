"""Gavel's job generator (OSDI'20 artifact semantics, see reference/gavel.md).

Job type uniform over the table's job types; duration on a V100 = 60 * 10^U(1.5, 3) s
with probability 0.8, else 60 * 10^U(3, 4) s; steps = duration x V100 throughput;
scale factor 1/2/4/8 with 70/10/15/5% in multi-GPU mode; Poisson arrivals with mean
inter-arrival 3600 / rate seconds (rate 0: everything at t = 0). Optionally each
single-GPU job asks for a fraction of its GPU (the spatial-sharing mix).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import count, islice

import numpy as np

from gpumosaic.model.job import JobSpec
from gpumosaic.workloads.throughputs import GavelThroughputTable

# The "GPU spatial sharing" report's per-job share of one GPU.
SPATIAL_MILLI_MIX: tuple[tuple[int, float], ...] = (
    (200, 0.20),
    (300, 0.20),
    (500, 0.25),
    (700, 0.15),
    (1000, 0.20),
)
SCALE_FACTORS: tuple[tuple[int, float], ...] = ((1, 0.70), (2, 0.10), (4, 0.15), (8, 0.05))
REFERENCE_GPU = "v100"


# The largest workload the generator makes up front: about 1 GB of job records and a
# run of tens of minutes on one core. Long steady-state studies use window=A-B, which
# generates jobs lazily and stops when the window's jobs are done.
MAX_GENERATED_JOBS = 200_000


@dataclass(frozen=True, slots=True)
class GavelWorkloadConfig:
    """``jobs`` None means unbounded (generate until the window's jobs are done)."""

    jobs: int | None = None
    rate_per_hour: float = 0.0
    window: tuple[int, int] | None = None
    multigpu: bool = False
    spatial_milli: bool = False

    def __post_init__(self) -> None:
        if self.jobs is None and self.window is None:
            raise ValueError("a generated workload needs jobs=N or window=A-B")
        if self.jobs is not None and self.jobs < 1:
            raise ValueError("jobs must be >= 1")
        if self.jobs is not None and self.jobs > MAX_GENERATED_JOBS:
            raise ValueError(
                f"jobs={self.jobs} is over the limit of {MAX_GENERATED_JOBS:,} generated jobs "
                "(memory grows with the job count; use window=A-B with a rate to study a "
                "steady state instead)"
            )
        if self.rate_per_hour < 0:
            raise ValueError("rate must be >= 0 jobs per hour")
        if self.window is not None:
            start, end = self.window
            if not 0 <= start < end:
                raise ValueError("window A-B needs 0 <= A < B")
            if self.jobs is not None and self.jobs < end:
                raise ValueError(f"window end {end} is past jobs={self.jobs}")
        if self.window is not None and self.rate_per_hour == 0 and self.jobs is None:
            raise ValueError("a window with rate=0 needs jobs=N")


class GavelGenerator:
    """A re-iterable, deterministic stream of JobSpecs: each ``iter()`` starts afresh
    from the seed, so the target workload can be sampled without disturbing the run."""

    def __init__(self, config: GavelWorkloadConfig, table: GavelThroughputTable, seed: int) -> None:
        self.config = config
        self.table = table
        self.seed = seed

    def __iter__(self) -> Iterator[JobSpec]:
        cfg = self.config
        # Independent streams so that, e.g., turning multigpu on does not change the
        # durations drawn (Gavel also keeps separate generators per quantity).
        streams = np.random.SeedSequence(self.seed).spawn(5)
        type_rng, duration_rng, scale_rng, arrival_rng, milli_rng = (
            np.random.default_rng(s) for s in streams
        )
        job_types = self.table.job_types
        scale_values = np.array([s for s, _ in SCALE_FACTORS])
        scale_probs = np.array([p for _, p in SCALE_FACTORS])
        milli_values = np.array([m for m, _ in SPATIAL_MILLI_MIX])
        milli_probs = np.array([p for _, p in SPATIAL_MILLI_MIX])
        arrival = 0.0
        ids = count() if cfg.jobs is None else range(cfg.jobs)
        for job_id in ids:
            if cfg.rate_per_hour > 0 and job_id > 0:
                arrival += float(arrival_rng.exponential(3600.0 / cfg.rate_per_hour))
            job_type = job_types[int(type_rng.integers(len(job_types)))]
            if duration_rng.random() < 0.8:
                duration = 60.0 * 10 ** duration_rng.uniform(1.5, 3.0)
            else:
                duration = 60.0 * 10 ** duration_rng.uniform(3.0, 4.0)
            scale = int(scale_rng.choice(scale_values, p=scale_probs)) if cfg.multigpu else 1
            if not self.table.has(job_type, scale, REFERENCE_GPU):
                scale = 1  # the table lacks a multi-GPU row for a few types
            milli = 1000
            if cfg.spatial_milli and scale == 1:
                milli = int(milli_rng.choice(milli_values, p=milli_probs))
            steps = duration * self.table.isolated(job_type, scale, REFERENCE_GPU)
            yield JobSpec(
                id=job_id,
                arrival_s=arrival,
                job_type=job_type,
                num_gpu=scale,
                gpu_milli=milli,
                work=steps,
                name=f"job{job_id}",
                may_span_nodes=True,  # Gavel's jobs may span servers
            )

    def sample(self, n: int) -> list[JobSpec]:
        return list(islice(iter(self), n))
