"""A job as a shared GPU sees it: run time alone, GPU share of that time, working set.

A job alternates GPU phases (kernels keep the GPU busy) and CPU phases (data loading,
evaluation, host-side work: the GPU is idle for this job). ``cycle_s`` is the length of one
GPU+CPU cycle; ``None`` means one GPU phase followed by one CPU phase -- the shape of the
nvshare thesis's benchmark jobs, whose CPU part overlaps the other job's GPU part.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpumosaic.model.job import JobSpec


@dataclass(frozen=True, slots=True)
class Phase:
    on_gpu: bool
    duration_s: float


@dataclass(frozen=True, slots=True)
class SharedJob:
    """One job on a shared GPU; ``solo_s`` is its (remaining) run time alone on that GPU."""

    name: str
    solo_s: float
    gpu_fraction: float
    working_set_mib: float
    cycle_s: float | None = None
    arrival_s: float = 0.0

    def __post_init__(self) -> None:
        if self.solo_s < 0 or not math.isfinite(self.solo_s):
            raise ValueError(f"{self.name}: solo_s must be finite and >= 0")
        if not 0.0 < self.gpu_fraction <= 1.0:
            raise ValueError(f"{self.name}: gpu_fraction must be in (0, 1]")
        if self.working_set_mib < 0:
            raise ValueError(f"{self.name}: working_set_mib must be >= 0")
        if self.cycle_s is not None and self.cycle_s <= 0:
            raise ValueError(f"{self.name}: cycle_s must be > 0")
        if self.arrival_s < 0:
            raise ValueError(f"{self.name}: arrival_s must be >= 0")

    @classmethod
    def from_spec(
        cls, job: JobSpec, solo_s: float, cycle_s: float | None = None, arrival_s: float = 0.0
    ) -> SharedJob:
        """The cluster simulator's view: a JobSpec with ``solo_s`` of work left alone.

        A job without a declared working set is assumed to use no GPU memory (it can never
        cause paging), which keeps old traces valid.
        """
        return cls(
            name=job.name or str(job.id),
            solo_s=solo_s,
            gpu_fraction=job.gpu_time_fraction,
            working_set_mib=float(job.gpu_memory_mib or 0),
            cycle_s=cycle_s,
            arrival_s=arrival_s,
        )

    def phases(self) -> tuple[Phase, ...]:
        """GPU then CPU in each cycle, the last cycle cut short; adjacent GPU phases merged."""
        cycle = self.solo_s if self.cycle_s is None else self.cycle_s
        out: list[Phase] = []
        done = 0.0
        while done < self.solo_s and cycle > 0:
            length = min(cycle, self.solo_s - done)
            for on_gpu, share in ((True, self.gpu_fraction), (False, 1.0 - self.gpu_fraction)):
                duration = length * share
                if duration <= 0:
                    continue
                if out and out[-1].on_gpu == on_gpu:
                    out[-1] = Phase(on_gpu, out[-1].duration_s + duration)
                else:
                    out.append(Phase(on_gpu, duration))
            done += length
        return tuple(out)
