"""What a simulation run returns: one record per job, a timeline and run counters.

Every simulator (event-driven, round-based, Gandiva) returns this same shape, and the
metrics module only reads it.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from gpumosaic.fallbacks import Fallbacks
from gpumosaic.placement.background import BackgroundLoad
from gpumosaic.results.outcome import JobEnd, Outcome, RejectReason

if TYPE_CHECKING:
    from gpumosaic.mechanisms.rounds.estimation import EstimationReport


class JobStatus(StrEnum):
    """What a driver knows of a job when the run stops; ``JobRecord.outcome`` refines it
    (a queued job that never ran is ``Outcome.NEVER_STARTED``). Failed and cancelled
    happen live only (a simulated job neither fails nor is cancelled)."""

    COMPLETED = "completed"
    RUNNING = "running"
    QUEUED = "queued"
    REJECTED = "rejected"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class JobRecord:
    """The fate of one job that arrived. Times are NaN where they did not happen."""

    job_id: int
    name: str
    job_type: str
    arrival_s: float
    start_s: float
    finish_s: float
    num_gpu: int
    gpu_milli: int
    status: JobStatus
    reason: str = ""  # for people: why rejected, failed (or why still queued at the end)
    rejection: RejectReason | None = None  # the typed reason of a rejected job
    gpu_model: str = ""  # GPU model of its first placement
    measured: bool = True  # inside the measurement window
    gpu_milli_seconds: float = 0.0  # milli-GPU held x seconds held
    alone_s: float = float("nan")  # run time it would take alone on its first GPU model
    suspended_s: float = 0.0
    migrations: int = 0
    thrashing_s: float = 0.0
    handovers: int = 0
    # Where it ran: (node, GPU slots) per part (a gang has several); () if it never ran
    # or its simulator does not record placements (rounds re-place jobs every round).
    placement: tuple[tuple[int, tuple[int, ...]], ...] = ()

    @property
    def outcome(self) -> Outcome:
        """How the job ended, typed: completed, rejected, or unfinished (running, queued
        after it had run, never started)."""
        status = self.status
        if status is JobStatus.QUEUED:
            return Outcome.QUEUED if self.start_s == self.start_s else Outcome.NEVER_STARTED
        return _OUTCOME[status]

    @property
    def end(self) -> JobEnd:
        """``outcome`` with its reason, one value (``results.outcome.JobEnd``). The
        words of a rejection are the record's ``reason`` (``code: detail``)."""
        rejection = self.rejection
        if rejection is not None and self.status is JobStatus.REJECTED:
            prefix = f"{rejection.value}: "
            detail = self.reason[len(prefix) :] if self.reason.startswith(prefix) else self.reason
            return JobEnd(Outcome.REJECTED, rejection, detail)
        return JobEnd(self.outcome, None, self.reason)

    @property
    def jct_s(self) -> float:
        return self.finish_s - self.arrival_s

    @property
    def queueing_s(self) -> float:
        return self.start_s - self.arrival_s


_OUTCOME = {
    JobStatus.COMPLETED: Outcome.COMPLETED,
    JobStatus.RUNNING: Outcome.RUNNING,
    JobStatus.REJECTED: Outcome.REJECTED,
    JobStatus.FAILED: Outcome.FAILED,
    JobStatus.CANCELLED: Outcome.CANCELLED,
}
_STATUS = {outcome: status for status, outcome in _OUTCOME.items()}


def status_of(outcome: Outcome) -> JobStatus:
    """The status a driver records for a job that ends (or stands) ``outcome``: an
    unfinished job waiting, started or not, is queued."""
    return _STATUS.get(outcome, JobStatus.QUEUED)


@dataclass(frozen=True, slots=True)
class Timeline:
    """Cluster state sampled at every change (piecewise constant from each time on)."""

    time_s: npt.NDArray[np.float64]
    allocated_milli: npt.NDArray[np.float64]
    running: npt.NDArray[np.int64]
    queued: npt.NDArray[np.int64]
    fragmentation_rate: npt.NDArray[np.float64]  # NaN where not sampled
    power_gpu_w: npt.NDArray[np.float64]
    power_cpu_w: npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class RunStats:
    events: int = 0
    rounds: int = 0
    policy_solves: int = 0
    policy_solve_s: float = 0.0
    policy_fallbacks: int = 0
    elapsed_s: float = 0.0


@dataclass(frozen=True, slots=True)
class GandivaWindow:
    """Gandiva's GPU-seconds inside the measurement window (its ends and the deltas)."""

    start_s: float
    end_s: float
    busy_gpu_s: float
    overhead_gpu_s: float
    effective_gpu_s: float
    held_gpu_s: float


@dataclass(frozen=True, slots=True)
class GandivaReport:
    """What Gandiva's mechanism did in a run, typed (was a string-keyed bag)."""

    handovers: int  # time-slice hand-overs, summed over jobs (suspend + resume pairs)
    migrations: int
    defragmentations: int
    spread_moves: int
    packs_tried: int
    packs_kept: int
    packs_undone: int
    suspended_s: float  # summed over jobs: placed but not holding its GPUs
    busy_gpu_s: float
    overhead_gpu_s: float  # switches and migrations
    held_gpu_s: float
    effective_gpu_s: float  # work done, in isolated GPU-seconds
    max_progress_residual: float
    max_memory_pressure: float
    window: GandivaWindow | None = None


@dataclass(frozen=True, slots=True)
class LeaseCounts:
    """The round mechanism's leases over a run (``mechanisms/rounds/leases.py``)."""

    extensions: int = 0  # a job kept its GPUs into the next round
    opportunities: int = 0  # rounds where it could have
    placement_failures: int = 0  # an entity chosen for a round found no GPUs (fallbacks)
    placement_s: float = 0.0  # CPU seconds spent placing
    fast_placements: int = 0  # placements by the identical-one-GPU-node shortcut


@dataclass(frozen=True, slots=True)
class SimResult:
    records: tuple[JobRecord, ...]
    timeline: Timeline
    stats: RunStats
    total_gpu_milli: int
    end_s: float  # simulated time when the run stopped
    fallbacks: Fallbacks = field(
        default_factory=Fallbacks
    )  # what the run did other than asked, by kind
    leases: LeaseCounts | None = None  # the round mechanism's
    gandiva: GandivaReport | None = None  # Gandiva's mechanism's
    background: BackgroundLoad | None = None  # the event mechanism's pre-filled load
    # The rounds' throughput estimation (``simulate --estimate-throughputs``).
    estimation: EstimationReport | None = None


class TimelineRecorder:
    """Collects timeline samples in growing typed columns (``array.array``: appends in C,
    no per-sample Python object kept); ``freeze`` turns them into numpy arrays once."""

    def __init__(self) -> None:
        self._time = array("d")
        self._allocated = array("d")
        self._running = array("q")
        self._queued = array("q")
        self._fragmentation = array("d")
        self._gpu_w = array("d")
        self._cpu_w = array("d")

    def __len__(self) -> int:
        return len(self._time)

    def record(
        self,
        time_s: float,
        allocated_milli: float,
        running: int,
        queued: int,
        fragmentation_rate: float,
        power_gpu_w: float,
        power_cpu_w: float,
    ) -> None:
        times = self._time
        if times and times[-1] == time_s:  # several changes at one instant: keep the last
            self._allocated[-1] = allocated_milli
            self._running[-1] = running
            self._queued[-1] = queued
            self._fragmentation[-1] = fragmentation_rate
            self._gpu_w[-1] = power_gpu_w
            self._cpu_w[-1] = power_cpu_w
            return
        times.append(time_s)
        self._allocated.append(allocated_milli)
        self._running.append(running)
        self._queued.append(queued)
        self._fragmentation.append(fragmentation_rate)
        self._gpu_w.append(power_gpu_w)
        self._cpu_w.append(power_cpu_w)

    def freeze(self) -> Timeline:
        return Timeline(
            time_s=np.array(self._time, dtype=np.float64),
            allocated_milli=np.array(self._allocated, dtype=np.float64),
            running=np.array(self._running, dtype=np.int64),
            queued=np.array(self._queued, dtype=np.int64),
            fragmentation_rate=np.array(self._fragmentation, dtype=np.float64),
            power_gpu_w=np.array(self._gpu_w, dtype=np.float64),
            power_cpu_w=np.array(self._cpu_w, dtype=np.float64),
        )
