"""Gavel's own job stream, draw for draw, so that a reproduction runs Gavel's very jobs.

gpumosaic's generator (``workloads/gavel.py``) draws from numpy streams: same
distributions, different jobs. One seed of Gavel's steady-state experiment has a large
sampling spread (20% of jobs last 17-167 h; the standard error of the mean duration of
1,000 jobs is about 6%), so comparing against Gavel's published seed-0 numbers is only
meaningful on the same jobs. This module reproduces the random process of Gavel's
simulator (Python's ``random.Random``, seeded with ``seed + 2`` for jobs and ``seed + 3``
for inter-arrival times; per job: a scale-factor draw, the duration draws, then the job
type drawn uniformly from its 26-entry job table; Poisson arrivals, first job at t = 0).
It is a re-implementation of the documented process, not Gavel's code.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from gpumosaic.model.job import JobSpec
from gpumosaic.options import parse_options
from gpumosaic.workloads.throughputs import GavelThroughputTable
from gpumosaic.workloads.workload import Workload

REFERENCE_GPU = "v100"


def _job_table() -> tuple[tuple[str, bool], ...]:
    """(job type, can run distributed) in the order of Gavel's job table."""
    rows: list[tuple[str, bool]] = []
    rows += [(f"ResNet-18 (batch size {b})", True) for b in (16, 32, 64, 128, 256)]
    rows += [(f"ResNet-50 (batch size {b})", True) for b in (16, 32, 64, 128)]
    rows += [(f"Transformer (batch size {b})", True) for b in (16, 32, 64, 128, 256)]
    rows += [(f"LM (batch size {b})", True) for b in (5, 10, 20, 40, 80)]
    rows += [(f"Recommendation (batch size {b})", False) for b in (512, 1024, 2048, 4096, 8192)]
    rows += [("A3C", False), ("CycleGAN", False)]
    return tuple(rows)


GAVEL_JOB_TABLE = _job_table()


def _scale_factor(u: float) -> int:
    if 0.7 <= u <= 0.8:
        return 2
    if 0.8 <= u <= 0.95:
        return 4
    if u >= 0.95:
        return 8
    return 1


@dataclass(frozen=True, slots=True)
class GavelStream:
    """A re-iterable stream of Gavel's generated jobs (unbounded unless ``jobs`` is set).

    The jobs drawn so far are kept: a run iterates the stream twice (the placement's
    target sample, then the arrivals), and the second pass reads them instead of
    drawing them again. They are the same jobs either way (the draws are seeded)."""

    rate_per_hour: float
    seed: int
    table: GavelThroughputTable
    multi_gpu: bool = False
    jobs: int | None = None
    # The jobs drawn so far, and the one live draw (made on the first iteration).
    _drawn: list[JobSpec] = field(default_factory=list, init=False, repr=False, compare=False)
    _source: list[Iterator[JobSpec]] = field(
        default_factory=list, init=False, repr=False, compare=False
    )

    def __reduce__(
        self,
    ) -> tuple[type[GavelStream], tuple[float, int, GavelThroughputTable, bool, int | None]]:
        # Pickled (to a worker) without the drawn jobs and the live draw.
        return (GavelStream, (self.rate_per_hour, self.seed, self.table, self.multi_gpu, self.jobs))

    def __iter__(self) -> Iterator[JobSpec]:
        drawn, source = self._drawn, self._source
        i = 0
        while True:
            if i < len(drawn):
                yield drawn[i]
                i += 1
                continue
            if not source:
                source.append(self._draw())
            job = next(source[0], None)
            if job is None:
                return
            drawn.append(job)

    def _draw(self) -> Iterator[JobSpec]:
        """Gavel's random process, from its first job."""
        job_rng = random.Random(self.seed + 2)
        arrival_rng = random.Random(self.seed + 3)
        mean_gap = 3600.0 / self.rate_per_hour if self.rate_per_hour > 0 else 0.0
        arrival = 0.0
        job_id = 0
        while self.jobs is None or job_id < self.jobs:
            scale = _scale_factor(job_rng.uniform(0, 1))
            if job_rng.random() >= 0.8:
                duration = 60 * (10 ** job_rng.uniform(3, 4))
            else:
                duration = 60 * (10 ** job_rng.uniform(1.5, 3))
            if not self.multi_gpu:
                scale = 1
            while True:
                job_type, distributed = job_rng.choice(GAVEL_JOB_TABLE)
                if scale == 1 or distributed:
                    break
            steps = duration * self.table.isolated(job_type, scale, REFERENCE_GPU)
            yield JobSpec(
                id=job_id,
                arrival_s=arrival,
                job_type=job_type,
                num_gpu=scale,
                gpu_milli=1000,
                work=steps,
                name=f"job{job_id}",
                may_span_nodes=True,  # Gavel's jobs may span servers
            )
            job_id += 1
            if mean_gap > 0:
                arrival += -math.log(1.0 - arrival_rng.random()) * mean_gap


def gavel_stream_workload(
    rate_per_hour: float,
    window: tuple[int, int],
    seed: int,
    table: GavelThroughputTable | None = None,
    multi_gpu: bool = False,
) -> Workload:
    """Gavel's continuous experiment: unbounded arrivals, jobs ``window`` measured."""
    table = table or GavelThroughputTable.load()
    stream = GavelStream(rate_per_hour, seed, table, multi_gpu)
    name = f"gavel-stream:rate={rate_per_hour:g},window={window[0]}-{window[1]},seed={seed}"
    return Workload(name, stream, table, measure=window)


@dataclass(frozen=True, slots=True)
class GavelStreamOptions:
    """The options of ``gavel-stream:window=A-B,rate=R[,multigpu=on]``."""

    window: tuple[int, int] | None = None
    rate: float | None = None
    multigpu: bool = False

    def __post_init__(self) -> None:
        if self.window is None or self.rate is None:
            raise ValueError(
                "gavel-stream needs window=A-B and a rate, "
                "e.g. gavel-stream:window=4000-5000,rate=3"
            )


def parse_gavel_stream(args: str, seed: int) -> Workload:
    """``window=4000-5000,rate=3`` (the text after ``gavel-stream:``) -> the workload."""
    return gavel_stream_from_options(parse_gavel_stream_options(args), seed)


def parse_gavel_stream_options(args: str) -> GavelStreamOptions:
    """The options after ``gavel-stream:``, checked (one line naming ``--workload``)."""
    return parse_options(GavelStreamOptions, args, what="gavel-stream option", flag="--workload")


def gavel_stream_from_options(options: GavelStreamOptions, seed: int) -> Workload:
    assert options.window is not None and options.rate is not None  # __post_init__
    return gavel_stream_workload(options.rate, options.window, seed, multi_gpu=options.multigpu)
