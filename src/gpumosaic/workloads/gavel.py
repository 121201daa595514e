"""Gavel's job generator (OSDI'20 artifact semantics, see reference/gavel.md).

Job type uniform over the table's job types; duration on a V100 = 60 * 10^U(1.5, 3) s
with probability 0.8, else 60 * 10^U(3, 4) s; steps = duration x V100 throughput;
scale factor 1/2/4/8 with 70/10/15/5% in multi-GPU mode; Poisson arrivals with mean
inter-arrival 3600 / rate seconds (rate 0: everything at t = 0). Optionally each
single-GPU job asks for a fraction of its GPU (the spatial-sharing mix).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice

import numpy as np

from gpumosaic.model.job import JobSpec

# The config is plain Python (checking a --workload imports no numpy); named here too.
from gpumosaic.workloads.gavel_config import MAX_GENERATED_JOBS as MAX_GENERATED_JOBS
from gpumosaic.workloads.gavel_config import GavelWorkloadConfig as GavelWorkloadConfig
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


class GavelGenerator:
    """A re-iterable, deterministic stream of JobSpecs: each ``iter()`` starts afresh
    from the seed, so the target workload can be sampled without disturbing the run.

    Jobs are drawn ``chunk`` at a time with numpy's bulk draws, which give the values
    that one draw per job gives, in the same order (each quantity has its own stream;
    ``tests/workloads/test_gavel_generator.py`` checks the stream against one draw per
    job across chunk boundaries). Only the durations' ``10 ** u`` is computed per job:
    numpy's vectorized power may differ from C's ``pow`` in the last bit.
    """

    def __init__(
        self,
        config: GavelWorkloadConfig,
        table: GavelThroughputTable,
        seed: int,
        chunk: int = 4096,
    ) -> None:
        if chunk < 1:
            raise ValueError("chunk must be >= 1")
        self.config = config
        self.table = table
        self.seed = seed
        self.chunk = chunk

    def __iter__(self) -> Iterator[JobSpec]:
        for jobs in self.chunks():
            yield from jobs

    def chunks(self) -> Iterator[list[JobSpec]]:
        """The stream as lists of at most ``chunk`` jobs, in order."""
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
        # Per (job type, scale factor): measured on the reference GPU, and its rate there.
        max_scale = int(scale_values.max())
        has = np.zeros((len(job_types), max_scale + 1), dtype=bool)
        reference = np.zeros((len(job_types), max_scale + 1))
        for i, job_type in enumerate(job_types):
            for scale in scale_values.tolist():
                if self.table.has(job_type, scale, REFERENCE_GPU):
                    has[i, scale] = True
                    reference[i, scale] = self.table.isolated(job_type, scale, REFERENCE_GPU)
        mean_gap = 3600.0 / cfg.rate_per_hour if cfg.rate_per_hour > 0 else 0.0
        arrival = 0.0
        start = 0
        while cfg.jobs is None or start < cfg.jobs:
            n = self.chunk if cfg.jobs is None else min(self.chunk, cfg.jobs - start)
            if mean_gap > 0:
                # Job 0 arrives at 0; each later job one exponential gap after the last
                # (cumsum adds in order, as ``arrival += gap`` does).
                gaps = arrival_rng.exponential(mean_gap, size=n if start else n - 1)
                lead = [arrival] if start else [0.0, 0.0]
                arrivals = np.cumsum(np.concatenate([lead, gaps]))[1:]
                arrival = float(arrivals[-1])
            else:
                arrivals = np.zeros(n)
            types = type_rng.integers(len(job_types), size=n)
            # Per job: one draw picks the range, the next is the uniform within it.
            draws = duration_rng.random(2 * n)
            long_job = draws[0::2] >= 0.8
            exponent = np.where(long_job, 3.0 + 1.0 * draws[1::2], 1.5 + 1.5 * draws[1::2])
            duration = np.array([60.0 * 10**u for u in exponent.tolist()])
            if cfg.multigpu:
                scales = scale_rng.choice(scale_values, p=scale_probs, size=n)
                # The table lacks a multi-GPU row for a few types: those run on one GPU.
                scales = np.where(has[types, scales], scales, 1)
            else:
                scales = np.ones(n, dtype=np.int64)
            milli = np.full(n, 1000, dtype=np.int64)
            if cfg.spatial_milli:
                single = scales == 1
                milli[single] = milli_rng.choice(
                    milli_values, p=milli_probs, size=int(single.sum())
                )
            unmeasured = ~has[types, scales]
            if unmeasured.any():
                job_type = job_types[int(types[unmeasured][0])]
                raise KeyError(f"{job_type!r} has no {REFERENCE_GPU} rate in {self.table.source}")
            steps = duration * reference[types, scales]
            ids = range(start, start + n)
            yield [
                JobSpec(
                    id=job_id,
                    arrival_s=arrival_s,
                    job_type=job_types[t],
                    num_gpu=scale,
                    gpu_milli=m,
                    work=work,
                    name=f"job{job_id}",
                    may_span_nodes=True,  # Gavel's jobs may span servers
                )
                for job_id, arrival_s, t, scale, m, work in zip(
                    ids,
                    arrivals.tolist(),
                    types.tolist(),
                    scales.tolist(),
                    milli.tolist(),
                    steps.tolist(),
                    strict=True,
                )
            ]
            start += n

    def sample(self, n: int) -> list[JobSpec]:
        return list(islice(iter(self), n))
