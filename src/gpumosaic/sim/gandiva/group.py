"""One GPU set and the jobs that take turns on it (Gandiva's suspend-resume time-slicing).

A *group* is a set of k GPUs on one server held as a whole in ClusterState. Its jobs are
arranged in *units* -- a single job, or two single-GPU jobs packed together -- that
take turns round-robin: ``units[0]`` holds the GPUs for a quantum, then is suspended and
the next unit resumes. Every hand-over leaves the GPUs idle for ``switch_s`` (suspend at
a mini-batch boundary, copy GPU memory out and in). A unit alone keeps the GPUs with no
quanta and no cost. Progress is piecewise linear between events, so the result is exact.

Ownership: the simulator owns groups and JobRuns; while a job is in a group, the group
is the one that advances its progress and accounting (``settle``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

from gpumosaic.model.gpu import MILLI_PER_GPU, GpuModel
from gpumosaic.model.job import JobSpec
from gpumosaic.sim.engine import EventHandle
from gpumosaic.sim.gandiva.config import GandivaConfig
from gpumosaic.sim.gandiva.rates import RateModel, working_set_mib

# A job whose remaining work is below this share of its work counts as finished (floating
# point leaves residues of ~1e-12 after many piecewise-linear steps).
FINISH_TOLERANCE = 1e-9
NAN = float("nan")


@dataclass(slots=True, eq=False)
class JobRun:
    """Progress and accounting of one job that has arrived (mutable)."""

    spec: JobSpec
    done: float = 0.0
    start_s: float = NAN
    finish_s: float = NAN
    first_model: str = ""
    alone_s: float = NAN
    running_s: float = 0.0  # wall seconds its unit held the GPUs
    gpu_milli_s: float = 0.0  # milli-GPU x seconds; a packed pair splits its GPU in half
    migrations: int = 0
    handovers: int = 0
    pack_tries: int = 0
    group: int = -1  # id of the group it is in, -1 when not placed

    @property
    def remaining(self) -> float:
        return self.spec.work - self.done

    @property
    def finished(self) -> bool:
        return not math.isnan(self.finish_s)


@dataclass(slots=True, eq=False)
class Unit:
    """What holds the GPUs at one time: one job, or a packed pair on trial or kept."""

    jobs: list[JobRun]
    on_trial: bool = False
    trial_left_s: float = 0.0  # running time left before introspection decides
    guest: JobRun | None = None  # the member that was packed in (leaves on undo)


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


@dataclass(slots=True, eq=False)
class GroupEvents:
    """What happened at one event of a group, for the simulator to act on."""

    finished: list[JobRun] = field(default_factory=list)
    kept: list[tuple[JobRun, JobRun]] = field(default_factory=list)
    undone: list[tuple[JobRun, JobRun]] = field(default_factory=list)  # (guest, host)


class GpuGroup:
    def __init__(
        self,
        gid: int,
        node: int,
        gpus: tuple[int, ...],
        gpu: GpuModel,
        rates: RateModel,
        config: GandivaConfig,
        ledger: Ledger,
        now: float,
    ) -> None:
        self.gid = gid
        self.node = node
        self.gpus = gpus
        self.gpu = gpu
        self.units: list[Unit] = []
        self.paused_until = now  # nothing runs before this (hand-over or migration)
        self.slice_end = math.inf
        self.last = now  # progress is settled up to here
        self.handle: EventHandle | None = None
        self._rates_model = rates
        self._config = config
        self._ledger = ledger  # the simulator's; groups add their GPU-seconds to it
        self._rates: tuple[float, ...] = ()  # speeds of units[0]'s jobs
        self._alone: tuple[float, ...] = ()

    @property
    def k(self) -> int:
        return len(self.gpus)

    def jobs(self) -> Iterator[JobRun]:
        for unit in self.units:
            yield from unit.jobs

    @property
    def num_jobs(self) -> int:
        return sum(len(u.jobs) for u in self.units)

    def unit_of(self, job: JobRun) -> Unit:
        for unit in self.units:
            if job in unit.jobs:
                return unit
        raise KeyError(f"job {job.spec.id} is not in group {self.gid}")

    # --- progress -------------------------------------------------------------------

    def settle(self, now: float) -> None:
        """Advance progress and accounting from ``last`` to ``now`` (no state change)."""
        ledger = self._ledger
        if now <= self.last:
            return
        if self.units:
            k = self.k
            pause_end = min(now, self.paused_until)
            if pause_end > self.last:
                ledger.overhead_gpu_s += k * (pause_end - self.last)
            run_dt = now - max(self.last, self.paused_until)
            if run_dt > 0:
                unit = self.units[0]
                share = MILLI_PER_GPU * k / len(unit.jobs)
                for job, rate, alone in zip(unit.jobs, self._rates, self._alone, strict=True):
                    job.done += rate * run_dt
                    job.running_s += run_dt
                    job.gpu_milli_s += share * run_dt
                    ledger.effective_gpu_s += k * run_dt * rate / alone
                ledger.busy_gpu_s += k * run_dt
                if unit.on_trial:
                    unit.trial_left_s = max(0.0, unit.trial_left_s - run_dt)
        self.last = now

    def next_event(self) -> float:
        """Time of the next finish, trial verdict or quantum end (inf if none)."""
        if not self.units:
            return math.inf
        start = max(self.last, self.paused_until)
        best = math.inf
        unit = self.units[0]
        for job, rate in zip(unit.jobs, self._rates, strict=True):
            if rate > 0:
                best = min(best, start + max(0.0, job.remaining) / rate)
        if unit.on_trial:
            best = min(best, start + unit.trial_left_s)
        if len(self.units) > 1:
            best = min(best, max(start, self.slice_end))
        return best

    def fire(self, now: float) -> GroupEvents:
        """Handle whatever is due at ``now``: finishes, then a trial verdict, then a quantum."""
        ledger = self._ledger
        self.settle(now)
        events = GroupEvents()
        if not self.units or now < self.paused_until:
            return events
        unit = self.units[0]
        for job in list(unit.jobs):
            if job.remaining <= FINISH_TOLERANCE * max(1.0, job.spec.work):
                residual = abs(job.remaining) / max(job.spec.work, 1e-300)
                ledger.max_residual = max(ledger.max_residual, residual)
                job.done = job.spec.work
                job.finish_s = now
                events.finished.append(job)
                self._drop(job, now)
        if events.finished:
            return events  # a finish changes the unit; the next event re-plans the rest
        if unit.on_trial and unit.trial_left_s <= 0.0:
            self._verdict(unit, now, events)
        elif len(self.units) > 1 and now >= self.slice_end:
            self.units.append(self.units.pop(0))
            self._hand_over(now)
        return events

    # --- changes --------------------------------------------------------------------

    def add(self, job: JobRun, now: float, resume_cost_s: float) -> None:
        """Append a job as its own unit; on an empty group it starts after the cost."""
        self.settle(now)
        job.group = self.gid
        self.units.append(Unit([job]))
        if len(self.units) == 1:
            self.paused_until = now + resume_cost_s
            self.slice_end = self.paused_until + self._config.quantum_s
            self._refresh()

    def remove(self, job: JobRun, now: float) -> None:
        """Take a job out (moved elsewhere or back to the queue)."""
        self.settle(now)
        self._drop(job, now)
        job.group = -1

    def pack(self, guest: JobRun, host: JobRun, now: float) -> None:
        """Pack ``guest`` beside ``host`` (a unit alone); the pair goes on trial."""
        self.settle(now)
        if guest.group == self.gid:
            self._drop(guest, now)
        host_unit = self.unit_of(host)
        if len(host_unit.jobs) != 1:
            raise ValueError(f"job {host.spec.id} is already packed")
        guest.group = self.gid
        host_unit.jobs.append(guest)
        host_unit.on_trial = True
        host_unit.trial_left_s = self._config.profile_s
        host_unit.guest = guest
        guest.pack_tries += 1
        if host_unit is self.units[0]:
            # The guest's state comes back onto the GPU: one resume's worth of idle time.
            self.paused_until = max(self.paused_until, now + self._config.switch_s)
            self.slice_end = max(self.slice_end, self.paused_until)
            guest.handovers += 1
            self._refresh()

    def pairs(self) -> Iterator[Unit]:
        return (u for u in self.units if len(u.jobs) == 2)

    # --- internals ------------------------------------------------------------------

    def _verdict(self, unit: Unit, now: float, events: GroupEvents) -> None:
        gain = sum(r / a for r, a in zip(self._rates, self._alone, strict=True))
        guest = unit.guest
        host = next(j for j in unit.jobs if j is not guest)
        unit.on_trial = False
        if guest is None:
            return
        if gain > 1.0 + self._config.pack_margin:
            events.kept.append((guest, host))
            return
        # Undo: the guest becomes its own unit again, at the back of the rotation.
        unit.jobs.remove(guest)
        unit.guest = None
        self.units.append(Unit([guest]))
        self._refresh()
        events.undone.append((guest, host))

    def _drop(self, job: JobRun, now: float) -> None:
        unit = self.unit_of(job)
        was_running = unit is self.units[0]
        unit.jobs.remove(job)
        unit.on_trial = False
        unit.guest = None
        if unit.jobs:
            if was_running:
                self._refresh()
            return
        self.units.remove(unit)
        if was_running and self.units:
            self._hand_over(now)

    def _hand_over(self, now: float) -> None:
        self.paused_until = now + self._config.switch_s
        self.slice_end = self.paused_until + self._config.quantum_s
        for job in self.units[0].jobs:
            job.handovers += 1
        self._refresh()

    def _refresh(self) -> None:
        """Recompute the speeds of whatever holds the GPUs now."""
        if not self.units:
            self._rates = self._alone = ()
            return
        jobs = self.units[0].jobs
        resident = sum(working_set_mib(j.spec) for j in jobs) / self.gpu.memory_mib
        self._ledger.max_memory_pressure = max(self._ledger.max_memory_pressure, resident)
        alone = tuple(self._rates_model.alone(j.spec, self.gpu) for j in jobs)
        if len(jobs) == 2:
            pair = self._rates_model.pair(jobs[0].spec, jobs[1].spec, self.gpu)
            self._rates = pair if pair is not None else (0.0, 0.0)
        else:
            self._rates = alone
        self._alone = alone
