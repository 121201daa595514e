"""One GPU set and the jobs that take turns on it (Gandiva's suspend-resume time-slicing),
as decisions: who holds the GPUs, until when, and what a pair's trial concluded.

A *group* is a set of k GPUs on one server held as a whole in ClusterState (or, for a
job that fits only across servers, a gang: GPUs of several servers, ``more``, that only
that job holds until it ends). Its jobs are
arranged in *units* -- a single job, or two single-GPU jobs packed together -- that
take turns round-robin: ``units[0]`` holds the GPUs for a quantum, then is suspended and
the next unit resumes. Every hand-over leaves the GPUs idle for ``switch_s`` (suspend at
a mini-batch boundary, copy GPU memory out and in). A unit alone keeps the GPUs with no
quanta and no cost.

The group keeps no progress: how far a job got is the driver's (a model in the
simulator, the jobs' own reports live). It tells its ``Meter`` how long ``units[0]`` held
the GPUs and when ``units[0]`` changes, at exactly the points where that matters, so a
driver can integrate progress piecewise between decisions. Every change it makes to who
runs is also written out as ``actions`` (suspend, resume, pack, unpack) for an executor.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from gpumosaic.mechanisms.gandiva.actions import Action, Pack, Resume, Suspend, Unpack
from gpumosaic.mechanisms.gandiva.config import GandivaConfig
from gpumosaic.mechanisms.gandiva.observations import RateBook
from gpumosaic.model.gpu import GpuModel
from gpumosaic.model.job import JobSpec


@dataclass(slots=True, eq=False)
class GandivaJob:
    """What the decider knows of one admitted job (mutable; the decider owns it)."""

    spec: JobSpec
    id: int = field(init=False)  # spec.id, read on every decision
    group: int = -1  # id of the group it is in, -1 when not placed
    migrations: int = 0  # moves to another server
    handovers: int = 0  # resumes onto the GPUs after the first start (and packs in)
    suspensions: int = 0  # times it stopped holding the GPUs without finishing
    pack_tries: int = 0
    finished: bool = False

    def __post_init__(self) -> None:
        self.id = self.spec.id


@dataclass(slots=True, eq=False)
class Unit:
    """What holds the GPUs at one time: one job, or a packed pair on trial or kept."""

    jobs: list[GandivaJob]
    on_trial: bool = False
    trial_left_s: float = 0.0  # running time left before introspection decides
    guest: GandivaJob | None = None  # the member that was packed in (leaves on undo)


class Meter(Protocol):
    """The driver's side of a group's time: told how long ``units[0]`` held the GPUs
    (after ``paused_s`` of hand-over or migration) and when ``units[0]`` changed. The
    simulator integrates modelled progress here; a live driver that measures progress
    itself may ignore both."""

    def ran(self, group: GpuGroup, paused_s: float, ran_s: float) -> None: ...

    def running(self, group: GpuGroup) -> None: ...


@dataclass(slots=True, eq=False)
class GroupVerdicts:
    """Pair trials decided at one wake-up of a group: (guest, host) each."""

    kept: list[tuple[GandivaJob, GandivaJob]] = field(default_factory=list)
    undone: list[tuple[GandivaJob, GandivaJob]] = field(default_factory=list)


class GpuGroup:
    def __init__(
        self,
        gid: int,
        node: int,
        gpus: tuple[int, ...],
        gpu: GpuModel,
        config: GandivaConfig,
        meter: Meter,
        rate_book: RateBook,
        actions: list[Action],
        now: float,
        more: tuple[tuple[int, tuple[int, ...]], ...] = (),
    ) -> None:
        self.gid = gid
        self.node = node
        self.gpus = gpus
        # A gang's GPUs on its other servers: (node, GPUs) each; () for a one-server set.
        self.more = more
        self.k = len(gpus) + sum(len(g) for _, g in more)
        self.gpu = gpu
        self.units: list[Unit] = []
        self.paused_until = now  # nothing runs before this (hand-over or migration)
        self.slice_end = math.inf
        self.last = now  # the meter has been told up to here
        self._config = config
        self._meter = meter
        self._rate_book = rate_book
        self._actions = actions  # the decider's log of this call's actions

    @property
    def parts(self) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """(node, GPUs) of every server the set holds GPUs on, its own first."""
        return ((self.node, self.gpus), *self.more)

    def jobs(self) -> Iterator[GandivaJob]:
        for unit in self.units:
            yield from unit.jobs

    @property
    def num_jobs(self) -> int:
        return sum(len(u.jobs) for u in self.units)

    def unit_of(self, job: GandivaJob) -> Unit:
        for unit in self.units:
            if job in unit.jobs:
                return unit
        raise KeyError(f"job {job.id} is not in group {self.gid}")

    def running_jobs(self) -> list[GandivaJob]:
        """The jobs of the unit that holds the GPUs (it may be resuming)."""
        return list(self.units[0].jobs) if self.units else []

    def pairs(self) -> Iterator[Unit]:
        return (u for u in self.units if len(u.jobs) == 2)

    # --- time -----------------------------------------------------------------------

    def settle(self, now: float) -> None:
        """Count down a trial and tell the meter about ``last`` .. ``now``."""
        if now <= self.last:
            return
        if self.units:
            pause_end = min(now, self.paused_until)
            paused_s = pause_end - self.last if pause_end > self.last else 0.0
            run_dt = now - max(self.last, self.paused_until)
            ran_s = run_dt if run_dt > 0 else 0.0
            self._meter.ran(self, paused_s, ran_s)
            unit = self.units[0]
            if ran_s > 0 and unit.on_trial:
                unit.trial_left_s = max(0.0, unit.trial_left_s - ran_s)
        self.last = now

    @property
    def run_start(self) -> float:
        """When ``units[0]`` runs (again) from: after any pause, and not before ``last``."""
        return max(self.last, self.paused_until)

    def next_due(self) -> float:
        """Time of the next trial verdict or quantum end (inf if none). A finish is the
        driver's to foresee (it knows the progress)."""
        if not self.units:
            return math.inf
        start = self.run_start
        best = math.inf
        unit = self.units[0]
        if unit.on_trial:
            best = min(best, start + unit.trial_left_s)
        if len(self.units) > 1:
            best = min(best, max(start, self.slice_end))
        return best

    def wake(self, now: float) -> GroupVerdicts | None:
        """A due trial verdict (returned), else a due quantum end (call ``finish`` for
        finished jobs instead: a finish changes the unit, and the next wake-up decides
        the rest)."""
        self.settle(now)
        if not self.units or now < self.paused_until:
            return None
        unit = self.units[0]
        # Due as ``next_due`` computes it: a residue of the trial below the resolution of
        # ``now`` (4.5e-13 s at t = 4,223.9) is no time left (else a wake at the same
        # time again, for ever).
        if unit.on_trial and self.run_start + unit.trial_left_s <= now:
            verdicts = GroupVerdicts()
            self._verdict(unit, verdicts)
            return verdicts
        if len(self.units) > 1 and now >= self.slice_end:
            for job in unit.jobs:
                job.suspensions += 1
                self._actions.append(Suspend(job.id, self.node))
            self.units.append(self.units.pop(0))
            self._hand_over(now)
        return None

    # --- changes --------------------------------------------------------------------

    def add(self, job: GandivaJob, now: float, resume_cost_s: float) -> bool:
        """Append a job as its own unit; on an empty group it runs after the cost
        (returns True then: it holds the GPUs)."""
        self.settle(now)
        job.group = self.gid
        self.units.append(Unit([job]))
        if len(self.units) == 1:
            self.paused_until = now + resume_cost_s
            self.slice_end = self.paused_until + self._config.quantum_s
            self._meter.running(self)
            return True
        return False

    def finish(self, job: GandivaJob, now: float) -> None:
        """A job of the running unit finished (the driver says so)."""
        self.settle(now)
        job.finished = True
        self._drop(job, now)
        job.group = -1

    def remove(self, job: GandivaJob, now: float) -> None:
        """Take a job out (moved elsewhere or back to the queue)."""
        self.settle(now)
        if self.units and job in self.units[0].jobs:
            job.suspensions += 1
            self._actions.append(Suspend(job.id, self.node))
        self._drop(job, now)
        job.group = -1

    def pack(self, guest: GandivaJob, host: GandivaJob, now: float) -> None:
        """Pack ``guest`` beside ``host`` (a unit alone); the pair goes on trial."""
        self.settle(now)
        if guest.group == self.gid:
            self._drop(guest, now)
        host_unit = self.unit_of(host)
        if len(host_unit.jobs) != 1:
            raise ValueError(f"job {host.id} is already packed")
        guest.group = self.gid
        host_unit.jobs.append(guest)
        host_unit.on_trial = True
        host_unit.trial_left_s = self._config.profile_s
        host_unit.guest = guest
        guest.pack_tries += 1
        running = host_unit is self.units[0]
        self._actions.append(Pack(guest.id, host.id, self.node, self.gpus, running))
        if running:
            # The guest's state comes back onto the GPU: one resume's worth of idle time.
            self.paused_until = max(self.paused_until, now + self._config.switch_s)
            self.slice_end = max(self.slice_end, self.paused_until)
            guest.handovers += 1
            self._meter.running(self)

    # --- internals ------------------------------------------------------------------

    def _verdict(self, unit: Unit, verdicts: GroupVerdicts) -> None:
        guest = unit.guest
        host = next(j for j in unit.jobs if j is not guest)
        unit.on_trial = False
        if guest is None:
            return
        gain = self._rate_book.gain(unit.jobs, self.gpu)
        if gain > 1.0 + self._config.pack_margin:
            verdicts.kept.append((guest, host))
            return
        # Undo: the guest becomes its own unit again, at the back of the rotation.
        unit.jobs.remove(guest)
        unit.guest = None
        self.units.append(Unit([guest]))
        guest.suspensions += 1
        self._actions.append(Unpack(guest.id, host.id, self.node, gain))
        self._meter.running(self)
        verdicts.undone.append((guest, host))

    def _drop(self, job: GandivaJob, now: float) -> None:
        unit = self.unit_of(job)
        was_running = unit is self.units[0]
        unit.jobs.remove(job)
        unit.on_trial = False
        unit.guest = None
        if unit.jobs:
            if was_running:
                self._meter.running(self)
            return
        self.units.remove(unit)
        if was_running and self.units:
            self._hand_over(now)

    def _hand_over(self, now: float) -> None:
        self.paused_until = now + self._config.switch_s
        self.slice_end = self.paused_until + self._config.quantum_s
        for job in self.units[0].jobs:
            job.handovers += 1
            self._actions.append(Resume(job.id, self.node, self.gpus, self.paused_until))
        self._meter.running(self)
