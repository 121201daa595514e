"""Target workload M of FGD: the popular task classes and their popularity p_m."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter

import numpy as np
import numpy.typing as npt

from gpumosaic.model.job import JobSpec

_CLASS_FIELDS = attrgetter("cpu_milli", "gpu_milli", "num_gpu", "allowed_models")


@dataclass(frozen=True, slots=True)
class TaskClass:
    cpu_milli: int
    gpu_milli: int
    num_gpu: int
    allowed_models: frozenset[str] | None


@dataclass(frozen=True, slots=True)
class TargetWorkload:
    """Task classes with popularities summing to 1 (FGD's M and p_m)."""

    classes: tuple[TaskClass, ...]
    popularity: npt.NDArray[np.float64]

    @classmethod
    def from_jobs(cls, jobs: Sequence[JobSpec], coverage: float = 0.95) -> TargetWorkload:
        """Group jobs by (cpu, gpu_milli, num_gpu, gpu_spec); keep the most popular classes
        until they cover ``coverage`` of the jobs; renormalize."""
        if not jobs:
            raise ValueError("the target workload needs at least one job")
        # Count plain field tuples (one C call per job), then fold them into classes (a
        # CPU-only job's gpu_milli does not matter); classes keep the order of their first
        # job, as counting classes directly would.
        counts: Counter[TaskClass] = Counter()
        for (cpu, milli, num_gpu, models), count in Counter(map(_CLASS_FIELDS, jobs)).items():
            counts[TaskClass(cpu, milli if num_gpu else 0, num_gpu, models)] += count
        # Stable order: by count descending, then by the class fields, so equal counts
        # never depend on hash order.
        ranked = sorted(
            counts.items(),
            key=lambda kv: (
                -kv[1],
                kv[0].num_gpu,
                kv[0].gpu_milli,
                kv[0].cpu_milli,
                sorted(kv[0].allowed_models or ()),
            ),
        )
        total = sum(counts.values())
        kept: list[tuple[TaskClass, int]] = []
        covered = 0
        for task_class, count in ranked:
            kept.append((task_class, count))
            covered += count
            if covered >= coverage * total:
                break
        weights = np.array([c for _, c in kept], dtype=np.float64)
        return cls(tuple(t for t, _ in kept), weights / weights.sum())
