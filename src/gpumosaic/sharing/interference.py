"""Interference models: how fast a job runs when other jobs share its GPU.

Every model answers one question, ``speed_factors(jobs_on_gpu)``: each job's throughput
relative to running alone on that GPU (1.0 = no slowdown). A run picks one by name with
``build_interference``:

* ``none`` -- ideal shares: co-located jobs run at their isolated throughput;
* ``parametric[:busy=B,alpha=A]`` -- compute contention. A job alone keeps the GPU busy a
  share ``d = busy * gpu_share`` of the time, where ``gpu_share`` is
  ``gpu_milli/1000 * gpu_time_fraction`` and ``busy`` (default 0.85) is how busy its GPU
  work keeps the GPU: launch gaps, host synchronizations and input stalls leave the rest
  idle. The hardware time-slices the co-located contexts, so while the summed demand
  ``D`` stays <= 1 everyone fits in the idle gaps, and above 1 every job slows by ``1/D``.
  Each extra context may also cost ``alpha`` (context switches, L2/TLB pollution; default
  0, already inside ``busy`` as calibrated below):
  ``speed = 1 / (max(1, D) * (1 + alpha * (k - 1)))`` for ``k`` jobs.
  ``busy = 0.85`` is what Gavel's measured P100 pairs say: their median packed/isolated
  throughput per job is 0.588 = 1 / (2 * 0.85) (V100 0.679, K80 0.536);
* ``measured[:busy=B,alpha=A]`` -- Gavel's measured pair throughputs: a job packed with
  one other runs at its pair throughput over its isolated throughput. Anything the table
  lacks (an unmeasured pair, three or more jobs, an unknown GPU) falls back to
  ``parametric`` with the same options; ``fallbacks`` counts those cases so a run can
  report them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from gpumosaic.errors import unknown_name
from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.job import JobSpec

# The grammar and the calibrated constants live in the light spec module (sharing/spec.py).
from gpumosaic.sharing.gpu_phase import GPU_PHASE_BUSY
from gpumosaic.sharing.spec import (
    DEFAULT_ALPHA,
    SHARING_MODELS,
    ParametricOptions,
    check_parametric,
    parse_sharing,
    split_spec,
)

Speeds = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class CoLocatedJob:
    """A job sharing a GPU, as the interference models see it.

    ``gpu_share`` is the fraction of the GPU's compute the job keeps busy when alone.
    """

    job_type: str = ""
    scale_factor: int = 1
    gpu_share: float = 1.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.gpu_share <= 1.0:
            raise ValueError(f"gpu_share must be in [0, 1], got {self.gpu_share}")

    @classmethod
    def from_spec(cls, job: JobSpec) -> CoLocatedJob:
        share = job.gpu_milli / MILLI_PER_GPU if job.is_fractional else 1.0
        return cls(job.job_type, max(job.num_gpu, 1), share * job.gpu_time_fraction)


class InterferenceModel(Protocol):
    @property
    def name(self) -> str: ...

    def speed_factors(
        self, jobs_on_gpu: Sequence[CoLocatedJob], gpu_key: str | None = None
    ) -> Speeds:
        """Each job's throughput on this GPU relative to running alone on it."""
        ...


class PairThroughputs(Protocol):
    """The part of Gavel's table the measured model reads."""

    def isolated(self, job_type: str, scale_factor: int, gpu_type: str) -> float: ...

    def packed(
        self, job_type_a: str, sf_a: int, job_type_b: str, sf_b: int, gpu_type: str
    ) -> tuple[float, float] | None: ...


@dataclass(frozen=True, slots=True)
class NoInterference:
    name: str = "none"

    def speed_factors(
        self, jobs_on_gpu: Sequence[CoLocatedJob], gpu_key: str | None = None
    ) -> Speeds:
        return np.ones(len(jobs_on_gpu), dtype=np.float64)


@dataclass(frozen=True, slots=True)
class ParametricInterference:
    alpha: float = DEFAULT_ALPHA
    busy: float = GPU_PHASE_BUSY
    name: str = "parametric"

    def __post_init__(self) -> None:
        check_parametric(self.alpha, self.busy)

    def speed_factors(
        self, jobs_on_gpu: Sequence[CoLocatedJob], gpu_key: str | None = None
    ) -> Speeds:
        k = len(jobs_on_gpu)
        if k <= 1:
            return np.ones(k, dtype=np.float64)
        demand = self.busy * float(sum(j.gpu_share for j in jobs_on_gpu))
        speed = 1.0 / (max(1.0, demand) * (1.0 + self.alpha * (k - 1)))
        return np.full(k, speed, dtype=np.float64)


class MeasuredInterference:
    """Gavel's pair throughputs, parametric where the table is silent (counted)."""

    __slots__ = ("fallback", "fallbacks", "lookups", "table")

    name = "measured"

    def __init__(self, table: PairThroughputs, fallback: ParametricInterference) -> None:
        self.table = table
        self.fallback = fallback
        self.fallbacks = 0
        self.lookups = 0

    def speed_factors(
        self, jobs_on_gpu: Sequence[CoLocatedJob], gpu_key: str | None = None
    ) -> Speeds:
        if len(jobs_on_gpu) <= 1:
            return np.ones(len(jobs_on_gpu), dtype=np.float64)
        self.lookups += 1
        measured = self._pair(jobs_on_gpu, gpu_key) if len(jobs_on_gpu) == 2 else None
        if measured is None:
            self.fallbacks += 1
            return self.fallback.speed_factors(jobs_on_gpu, gpu_key)
        return measured

    def _pair(self, jobs: Sequence[CoLocatedJob], gpu_key: str | None) -> Speeds | None:
        if gpu_key is None:
            return None
        a, b = jobs
        try:
            pair = self.table.packed(
                a.job_type, a.scale_factor, b.job_type, b.scale_factor, gpu_key
            )
            if pair is None:
                return None
            alone_a = self.table.isolated(a.job_type, a.scale_factor, gpu_key)
            alone_b = self.table.isolated(b.job_type, b.scale_factor, gpu_key)
        except KeyError:
            return None
        if alone_a <= 0 or alone_b <= 0:
            return None
        return np.array([pair[0] / alone_a, pair[1] / alone_b], dtype=np.float64)


def build_interference(spec: str, table: PairThroughputs | None = None) -> InterferenceModel:
    """Build a model from ``none``, ``parametric:alpha=0.1,busy=0.85`` or ``measured``.

    ``measured`` reads ``table`` or, when none is given, Gavel's packaged table.
    """
    choice = parse_sharing(spec)
    if choice.name == "none":
        return NoInterference()
    if choice.parametric is not None:
        options = choice.parametric
        fallback = ParametricInterference(options.alpha, options.busy)
        if choice.name == "parametric":
            return fallback
        if table is None:
            from gpumosaic.workloads.throughputs import GavelThroughputTable

            table = GavelThroughputTable.load()
        return MeasuredInterference(table, fallback)
    # capped and nvshare are speed models (speed.py), not interference models.
    raise unknown_name("sharing model", choice.name, SHARING_MODELS, field="--sharing")


__all__ = [
    "DEFAULT_ALPHA",
    "GPU_PHASE_BUSY",
    "CoLocatedJob",
    "InterferenceModel",
    "MeasuredInterference",
    "NoInterference",
    "ParametricInterference",
    "ParametricOptions",
    "build_interference",
    "split_spec",
]
