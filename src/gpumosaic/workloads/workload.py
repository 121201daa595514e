"""A workload: a re-iterable job stream in arrival order plus how fast jobs run."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import islice

from gpumosaic.model.job import JobSpec
from gpumosaic.workloads.throughputs import Throughputs

# How many jobs of an unbounded stream stand for it when a placement needs the target
# workload (FGD's M) before the run.
TARGET_SAMPLE_JOBS = 2000


@dataclass(frozen=True, slots=True)
class Workload:
    """``jobs`` must yield the same JobSpecs, sorted by arrival, every time it is iterated.

    ``measure`` is the half-open id window [A, B) whose jobs are measured; the run ends
    when they have all finished (then the stream may be unbounded). Without a window,
    every job is measured and the stream must be finite.
    """

    name: str
    jobs: Iterable[JobSpec]
    throughputs: Throughputs
    measure: tuple[int, int] | None = None

    def is_measured(self, job_id: int) -> bool:
        return self.measure is None or self.measure[0] <= job_id < self.measure[1]

    def target_sample(self) -> Sequence[JobSpec]:
        """Jobs that define the target workload: all of a finite list, else a prefix."""
        if isinstance(self.jobs, Sequence):
            return self.jobs
        limit = TARGET_SAMPLE_JOBS if self.measure is None else max(self.measure[1], 1000)
        return list(islice(iter(self.jobs), limit))
