"""Sharing models as the cluster simulator uses them: how a job's demand is admitted
and how fast co-located jobs run, whatever policy and placement chose them.

``--sharing`` spellings (documented in docs/sharing.md):

* ``none`` -- ideal shares: a job runs at its isolated throughput whatever shares its GPU;
* ``capped`` -- a fractional job's compute is capped at its share (like an MPS active
  thread percentage): it runs at gpu_milli/1000 of its isolated throughput, alone or not;
* ``parametric[:busy=B,alpha=A]`` / ``measured[:...]`` -- the interference models;
* ``nvshare[:tq=30,anti_thrashing=on,jobs_per_gpu=2]`` -- time-sharing: a whole-GPU,
  single-GPU job is admitted as a 1/jobs_per_gpu time share of a GPU (so up to that many
  jobs hold one GPU), and co-located jobs progress at the average rates nvshare's
  time-quantum model gives them (hand-overs, refills, thrashing when their working sets
  overflow GPU memory and anti-thrashing is off).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np
import numpy.typing as npt

from gpumosaic.fallbacks import Fallback, Fallbacks
from gpumosaic.model.gpu import MILLI_PER_GPU, GpuModel
from gpumosaic.model.job import JobSpec
from gpumosaic.sharing.interference import (
    CoLocatedJob,
    InterferenceModel,
    MeasuredInterference,
    PairThroughputs,
    build_interference,
)
from gpumosaic.sharing.jobs import SharedJob
from gpumosaic.sharing.nvshare import NvshareModel
from gpumosaic.sharing.spec import parse_sharing

Speeds = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class ShareSpeeds:
    """Per co-located job: speed relative to alone, and the costs of sharing as shares of
    wall time (waiting for the GPU, thrashing) and hand-overs per second, so the simulator
    can charge each job for the time it spends in that company."""

    speeds: Speeds
    waiting_share: Speeds
    thrashing_share: Speeds
    handovers_per_s: Speeds

    @classmethod
    def plain(cls, speeds: Speeds) -> ShareSpeeds:
        zero = np.zeros(len(speeds))
        return cls(speeds, zero, zero, zero)


class SpeedModel(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def ideal(self) -> bool:
        """True when co-location never changes speed (the simulator can skip re-rating)."""
        ...

    def admit(self, job: JobSpec) -> JobSpec:
        """The demand the placement sees for ``job`` under this model."""
        ...

    def solo_factor(self, job: JobSpec) -> float:
        """Speed of ``job`` alone on its GPU relative to the throughput table."""
        ...

    def factors(
        self, jobs: Sequence[JobSpec], solo_left_s: Sequence[float], gpu: GpuModel
    ) -> ShareSpeeds:
        """Each job's speed on this GPU relative to running alone (1.0 = no slowdown)."""
        ...

    def fallbacks(self) -> Fallbacks:
        """What the model answered other than asked so far (e.g. unmeasured pairs)."""
        ...


@dataclass(frozen=True, slots=True)
class InterferenceSpeed:
    model: InterferenceModel

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def ideal(self) -> bool:
        return self.model.name == "none"

    def admit(self, job: JobSpec) -> JobSpec:
        return job

    def solo_factor(self, job: JobSpec) -> float:
        return 1.0

    def factors(
        self, jobs: Sequence[JobSpec], solo_left_s: Sequence[float], gpu: GpuModel
    ) -> ShareSpeeds:
        if len(jobs) == 1:
            return ShareSpeeds.plain(np.ones(1))
        colocated = [CoLocatedJob.from_spec(j) for j in jobs]
        return ShareSpeeds.plain(self.model.speed_factors(colocated, gpu.throughput_key))

    def fallbacks(self) -> Fallbacks:
        if isinstance(self.model, MeasuredInterference):
            return Fallbacks.of(Fallback.UNMEASURED_PAIR, self.model.fallbacks)
        return Fallbacks()


@dataclass(frozen=True, slots=True)
class NvshareSpeed:
    model: NvshareModel
    jobs_per_gpu: int = 2
    name: str = "nvshare"
    ideal: bool = False

    def solo_factor(self, job: JobSpec) -> float:
        return 1.0

    def admit(self, job: JobSpec) -> JobSpec:
        if job.num_gpu == 1 and job.gpu_milli == MILLI_PER_GPU:
            return replace(job, gpu_milli=MILLI_PER_GPU // self.jobs_per_gpu)
        return job

    def factors(
        self, jobs: Sequence[JobSpec], solo_left_s: Sequence[float], gpu: GpuModel
    ) -> ShareSpeeds:
        if len(jobs) == 1:
            return ShareSpeeds.plain(np.ones(1))
        shared = [
            replace(SharedJob.from_spec(job, max(solo, 1e-9)), name=f"{job.id}")
            for job, solo in zip(jobs, solo_left_s, strict=True)
        ]
        # The jobs' average rates and costs until each ends, if the company stayed the
        # same; the simulator asks again whenever the company changes.
        outcome = self.model.simulate(shared, gpu.memory_mib)
        runs = np.array([max(j.run_s, 1e-12) for j in outcome.jobs])
        solo = np.array([j.solo_s for j in outcome.jobs])
        return ShareSpeeds(
            speeds=np.where(runs > 1e-12, solo / runs, 1.0),
            waiting_share=np.array([j.lock_wait_s for j in outcome.jobs]) / runs,
            thrashing_share=np.array([j.thrash_s for j in outcome.jobs]) / runs,
            handovers_per_s=np.array([j.handovers_in for j in outcome.jobs]) / runs,
        )

    def fallbacks(self) -> Fallbacks:
        return Fallbacks()


@dataclass(frozen=True, slots=True)
class CappedSpeed:
    """Shares are compute caps: speed = share of the GPU, never more, never less."""

    name: str = "capped"
    ideal: bool = True  # co-location never changes a capped job's speed

    def admit(self, job: JobSpec) -> JobSpec:
        return job

    def solo_factor(self, job: JobSpec) -> float:
        return job.gpu_milli / MILLI_PER_GPU if job.is_fractional else 1.0

    def factors(
        self, jobs: Sequence[JobSpec], solo_left_s: Sequence[float], gpu: GpuModel
    ) -> ShareSpeeds:
        return ShareSpeeds.plain(np.ones(len(jobs)))

    def fallbacks(self) -> Fallbacks:
        return Fallbacks()


def build_speed_model(spec: str, table: PairThroughputs | None = None) -> SpeedModel:
    """The speed model ``--sharing`` names, built from its parsed spelling (``spec.py``)."""
    choice = parse_sharing(spec)
    if choice.name == "capped":
        return CappedSpeed()
    if choice.nvshare is None:
        return InterferenceSpeed(build_interference(spec, table))
    options = choice.nvshare
    model = NvshareModel(tq_s=options.tq, anti_thrashing=options.anti_thrashing)
    return NvshareSpeed(model, options.jobs_per_gpu)
