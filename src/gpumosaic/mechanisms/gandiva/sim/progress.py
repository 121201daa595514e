"""The simulator's progress model for Gandiva: how far each job got, from modelled rates.

``ModelledProgress`` is the decider's ``Meter``: each GPU set tells it how long its running
unit held the GPUs (and how long the GPUs sat idle in a hand-over or migration), and when
its running unit changed. Between those points progress is linear at the modelled rates
(alone from the throughput table, packed from Gavel's measured pairs), so the schedule
is exact. It also keeps what the GPU-seconds were spent on (``Ledger``), and gives the
decider the modelled rates as its "measured" ones (``rates_of``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpumosaic.mechanisms.gandiva.group import GpuGroup
from gpumosaic.mechanisms.gandiva.rates import RateModel, working_set_mib
from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.job import JobSpec

# A job whose remaining work is below this share of its work counts as finished (floating
# point leaves residues of ~1e-12 after many piecewise-linear steps).
FINISH_TOLERANCE = 1e-9
NAN = float("nan")


@dataclass(slots=True, eq=False)
class JobProgress:
    """Progress and accounting of one job that has arrived (mutable)."""

    spec: JobSpec
    done: float = 0.0
    start_s: float = NAN
    finish_s: float = NAN
    first_model: str = ""
    alone_s: float = NAN
    running_s: float = 0.0  # wall seconds its unit held the GPUs
    gpu_milli_s: float = 0.0  # milli-GPU x seconds; a packed pair splits its GPU in half

    @property
    def remaining(self) -> float:
        return self.spec.work - self.done

    @property
    def finished(self) -> bool:
        return not math.isnan(self.finish_s)

    @property
    def started(self) -> bool:
        return not math.isnan(self.start_s)


@dataclass(slots=True)
class Ledger:
    """GPU-seconds by what the GPUs did; with ClusterState's held GPU-seconds, they must
    add up: busy + overhead == held."""

    busy_gpu_s: float = 0.0  # some unit ran
    overhead_gpu_s: float = 0.0  # hand-overs and migrations: held, nothing runs
    effective_gpu_s: float = 0.0  # busy weighted by normalized speed (a good pair > 1)
    max_residual: float = 0.0  # largest |progress - work| / work at a finish, before snapping
    # GPU memory pressure: working sets on a GPU / its memory, largest seen. Only the unit
    # holding the GPUs counts (suspended jobs' memory is in host memory); packing keeps
    # it <= 1, so it says how close to full the pairs ran.
    max_memory_pressure: float = 0.0


@dataclass(frozen=True, slots=True)
class _Running:
    jobs: tuple[JobProgress, ...]
    rates: tuple[float, ...]
    alone: tuple[float, ...]


class ModelledProgress:
    """Per-job progress and the ledger, advanced by the GPU sets (the ``Meter``)."""

    def __init__(self, rates: RateModel) -> None:
        self.rates = rates
        self.ledger = Ledger()
        self.jobs: dict[int, JobProgress] = {}
        # Per set: its running unit's jobs' progress, rates and rates alone, in the
        # unit's order (kept in step with the unit by ``running``).
        self._running: dict[int, _Running] = {}
        self._compositions: dict[tuple[int, int, str], _Running] = {}
        self._by_job: dict[int, list[tuple[int, int, str]]] = {}

    def add(self, job: JobSpec) -> JobProgress:
        progress = JobProgress(job)
        self.jobs[job.id] = progress
        return progress

    # --- the Meter --------------------------------------------------------------------

    def ran(self, group: GpuGroup, paused_s: float, ran_s: float) -> None:
        ledger = self.ledger
        k = group.k
        if paused_s > 0:
            ledger.overhead_gpu_s += k * paused_s
        if ran_s > 0:
            running = self._running[group.gid]
            share = MILLI_PER_GPU * k / len(running.jobs)
            for progress, rate, rate_alone in zip(
                running.jobs, running.rates, running.alone, strict=True
            ):
                progress.done += rate * ran_s
                progress.running_s += ran_s
                progress.gpu_milli_s += share * ran_s
                ledger.effective_gpu_s += k * ran_s * rate / rate_alone
            ledger.busy_gpu_s += k * ran_s

    def running(self, group: GpuGroup) -> None:
        """Recompute the speeds of whatever holds the set's GPUs now."""
        if not group.units:
            self._running.pop(group.gid, None)
            return
        units = group.units[0].jobs
        # A unit's speeds depend only on who is in it and where: time-slicing brings the
        # same few units back every quantum, so they are computed once per composition.
        key = (units[0].id, units[1].id if len(units) > 1 else -1, group.gpu.name)
        running = self._compositions.get(key)
        if running is None:
            running = self._compute(group)
            self._compositions[key] = running
            for member in units:
                self._by_job.setdefault(member.id, []).append(key)
        self._running[group.gid] = running

    def _compute(self, group: GpuGroup) -> _Running:
        progress = tuple(self.jobs[j.id] for j in group.units[0].jobs)
        jobs = [p.spec for p in progress]
        gpu = group.gpu
        resident = sum(working_set_mib(j) for j in jobs) / gpu.memory_mib
        self.ledger.max_memory_pressure = max(self.ledger.max_memory_pressure, resident)
        alone = tuple(self.rates.alone(j, gpu) for j in jobs)
        rates: tuple[float, ...]
        if len(jobs) == 2:
            pair = self.rates.pair(jobs[0], jobs[1], gpu)
            rates = pair if pair is not None else (0.0, 0.0)
        else:
            rates = alone
        return _Running(progress, rates, alone)

    def closed(self, gid: int) -> None:
        self._running.pop(gid, None)

    def forget(self, job_id: int) -> None:
        """A finished job's compositions are not needed again."""
        for key in self._by_job.pop(job_id, ()):
            self._compositions.pop(key, None)

    # --- reading ------------------------------------------------------------------------

    def rates_of(self, group: GpuGroup) -> tuple[float, ...]:
        """Modelled rates of the set's running unit, in the unit's order."""
        return self._running[group.gid].rates

    def next_finish(self, group: GpuGroup) -> float:
        """When the first job of the set's running unit finishes at its rate (inf: none)."""
        if not group.units:
            return math.inf
        start = group.run_start
        best = math.inf
        running = self._running[group.gid]
        for progress, rate in zip(running.jobs, running.rates, strict=True):
            if rate > 0:
                best = min(best, start + max(0.0, progress.remaining) / rate)
        return best

    def finish_due(self, group: GpuGroup, now: float) -> list[int]:
        """Jobs of the running unit whose work is done at ``now`` (progress settled);
        they are marked finished, their progress snapped to their work."""
        out: list[int] = []
        ledger = self.ledger
        for progress in self._running[group.gid].jobs:
            work = progress.spec.work
            if progress.remaining <= FINISH_TOLERANCE * max(1.0, work):
                residual = abs(progress.remaining) / max(work, 1e-300)
                ledger.max_residual = max(ledger.max_residual, residual)
                progress.done = work
                progress.finish_s = now
                out.append(progress.spec.id)
        return out
