"""Gandiva (OSDI'18) as a simulator: the clock-free ``GandivaDecider`` (affinity
placement, suspend-resume time-slicing, introspective packing and migration) driven by the
event engine, with progress from modelled rates.

The simulator owns the clock (the engine), the arrivals, the progress model
(``ModelledProgress``: how far each job got, and the GPU-seconds by what they did), the
timeline and the measurement window. The decider owns every decision and the state it
decides with. At an arrival the simulator admits the job; at a GPU set's event -- the
earliest of its running jobs' modelled finishes and the decider's ``next_due`` (quantum
end, trial verdict) -- it reports the jobs that finished and the running jobs' modelled
rates (the decider's "measured" rates), and wakes the set. After each call it re-arms the
timers of the sets the decider says changed, and records the timeline after a pass.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np

from gpumosaic.engine.core import Engine, EventHandle
from gpumosaic.errors import BookkeepingError
from gpumosaic.mechanisms.gandiva.actions import Pack, Start, StartGang
from gpumosaic.mechanisms.gandiva.config import GandivaConfig
from gpumosaic.mechanisms.gandiva.decider import GandivaDecider, Step
from gpumosaic.mechanisms.gandiva.ranking import gandiva_target
from gpumosaic.mechanisms.gandiva.rates import RateModel
from gpumosaic.mechanisms.gandiva.sim.progress import ModelledProgress
from gpumosaic.mechanisms.gandiva.sim.records import Snapshot, build_result
from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.job import JobSpec
from gpumosaic.model.power import PowerTracker
from gpumosaic.placement.base import PlacementStrategy
from gpumosaic.placement.fragmentation import shared_tracker
from gpumosaic.policies.ordering import Fifo, QueueOrder
from gpumosaic.results.result import RunStats, SimResult, TimelineRecorder
from gpumosaic.workloads.workload import Workload

_PLACEMENTS = (Start, StartGang, Pack)  # actions that may place a job for the first time
ARRIVAL_PRIORITY = 1  # at equal times, finishes (priority 0) free GPUs before arrivals
FIFO: QueueOrder = Fifo()  # Gandiva's own queue order (a frozen value: safe as a default)


class GandivaSimulator:
    def __init__(
        self,
        cluster: ClusterSpec,
        workload: Workload,
        config: GandivaConfig,
        rng: np.random.Generator,
        window_s: tuple[float, float] | None = None,
        order: QueueOrder = FIFO,
        placement: PlacementStrategy | None = None,
        backfill: bool = True,
        on_step: Callable[[float, Step], None] | None = None,
    ) -> None:
        """``rng`` is the run's Generator (``run.build``: seeded from ``--seed``, drawn from
        by nothing before); ``order`` a built queue order; ``placement`` a built strategy
        that ranks the servers within an affinity tier, None for Gandiva's own order.
        ``on_step(now, step)`` sees every decision of the run (its typed actions)."""
        self.cluster = cluster
        self.on_step = on_step
        # GPU-seconds are also snapshot at the window's ends, so utilization can be measured
        # over the loaded part of a run rather than up to the last straggler's finish.
        self.window_s = window_s
        self.snapshots: list[Snapshot] = []
        self.workload = workload
        self.config = config
        self.engine = Engine()
        self.timeline = TimelineRecorder()
        self.progress = ModelledProgress(RateModel(workload.throughputs))
        self.decider = GandivaDecider(
            cluster,
            workload.throughputs,
            config,
            rng,
            order=order,
            placement=placement,
            backfill=backfill,
            meter=self.progress,
        )
        self._timers: dict[int, EventHandle] = {}
        # Fragmentation is measured against the same job shapes as every other simulator's.
        self.target = gandiva_target(workload.target_sample())
        self.power = PowerTracker(self.decider.state)
        self._jobs: Iterator[JobSpec] = iter(workload.jobs)
        measure = workload.measure
        self._measured_left: int | None = None if measure is None else measure[1] - measure[0]

    # --- run --------------------------------------------------------------------------

    def run(self) -> SimResult:
        started = time.perf_counter()
        self._schedule_next_arrival()
        if self.window_s is not None:
            for edge in self.window_s:
                if math.isfinite(edge):  # an infinite end means "when the run stops"
                    self.engine.schedule(edge, self._snapshot, priority=-1)
        while self._measured_left != 0 and self.engine.step():
            if self.config.check_invariants:
                self.check()
        self.decider.sets.settle_all(self.engine.now)
        while self.window_s is not None and len(self.snapshots) < 2:
            self._snapshot()  # the run ended before the window did
        decider = self.decider
        return build_result(
            jobs=decider.jobs,
            progress=self.progress.jobs,
            queued=decider.queue,
            rejected=decider.rejected,
            is_measured=self.workload.is_measured,
            counters=decider.counters,
            ledger=self.progress.ledger,
            held_gpu_s=decider.sets.held_gpu_s,
            snapshots=self.snapshots,
            timeline=self.timeline.freeze(),
            total_gpu_milli=decider.state.total_gpu_milli,
            end_s=self.engine.now,
            stats=RunStats(
                events=self.engine.events_processed, elapsed_s=time.perf_counter() - started
            ),
            fallbacks=decider.fallbacks,
        )

    def _snapshot(self) -> None:
        if len(self.snapshots) < 2:
            sets = self.decider.sets
            sets.settle_all(self.engine.now)
            self.snapshots.append((self.engine.now, replace(self.progress.ledger), sets.held_gpu_s))

    def check(self) -> None:
        """Bookkeeping invariants: state, groups and jobs agree (tests run this always)."""
        decider = self.decider
        placed = decider.sets.check()
        active = sum(1 for j in decider.jobs.values() if j.group >= 0)
        if active != placed or any(j.group >= 0 for j in decider.queue):
            raise BookkeepingError("a job is in two places or none")
        for group in decider.sets:
            for job in group.jobs():
                if self.progress.jobs[job.id].done > job.spec.work * (1 + 1e-9):
                    raise BookkeepingError(f"job {job.id} ran past its work")

    # --- events -----------------------------------------------------------------------

    def _schedule_next_arrival(self) -> None:
        job = next(self._jobs, None)
        if job is not None:
            self.engine.schedule(job.arrival_s, lambda: self._on_arrival(job), ARRIVAL_PRIORITY)

    def _on_arrival(self, job: JobSpec) -> None:
        self.progress.add(job)
        now = self.engine.now
        step = self.decider.admit(job, now)
        if job.id in self.decider.rejected:
            self._count_measured(job.id)
        self._apply(step, now)
        self._schedule_next_arrival()

    def _count_measured(self, job_id: int) -> None:
        if self._measured_left is not None and self.workload.is_measured(job_id):
            self._measured_left -= 1

    def _on_group_event(self, gid: int) -> None:
        now = self.engine.now
        group = self.decider.group(gid)
        assert group is not None  # a closed set's timer is cancelled
        group.settle(now)
        finished: list[int] = []
        if group.units and now >= group.paused_until:
            finished = self.progress.finish_due(group, now)
            if not finished and group.units[0].on_trial:
                # The decider judges a pair by its "measured" rates: the modelled ones.
                jobs = group.units[0].jobs
                for job, rate in zip(jobs, self.progress.rates_of(group), strict=True):
                    self.decider.observe(job.id, rate)
        for job_id in finished:
            self._count_measured(job_id)
            self.progress.forget(job_id)
        self._apply(self.decider.wake(gid, now, finished), now)

    def _apply(self, step: Step, now: float) -> None:
        """Execute a step: first placements start their clocks; re-arm changed timers."""
        if self.on_step is not None:
            self.on_step(now, step)
        for action in step.actions:
            if type(action) in _PLACEMENTS:
                self._placed(action, now)  # type: ignore[arg-type]
        timers, groups, progress = self._timers, self.decider.sets, self.progress
        for gid in step.retimed:
            timer = timers.pop(gid, None)
            if timer is not None:
                timer.cancel()
            group = groups.get(gid)
            if group is None:
                progress.closed(gid)
                continue
            when = progress.next_finish(group)
            due = group.next_due()
            if due < when:
                when = due
            if when != math.inf:
                timers[gid] = self.engine.schedule(when, partial(self._on_group_event, gid))
        if step.scheduled:
            self._record(now)

    def _placed(self, action: Start | StartGang | Pack, now: float) -> None:
        """A job placed for the first time starts its clock (start, GPU model, alone time)."""
        job_id = action.guest_id if isinstance(action, Pack) else action.job_id
        job = self.progress.jobs[job_id]
        if not job.started:
            node = action.parts[0][0] if isinstance(action, StartGang) else action.node
            gpu = self.cluster.nodes[node].gpu
            job.start_s = now
            job.first_model = gpu.name
            job.alone_s = job.spec.work / self.progress.rates.alone(job.spec, gpu)

    def _record(self, now: float) -> None:
        state = self.decider.state
        gpu_w, cpu_w = self.power.power_w
        fragmentation = shared_tracker(state, self.target).rate()
        self.timeline.record(
            now,
            float(state.allocated_gpu_milli),
            self.decider.running_jobs(now),
            len(self.decider.queue),
            fragmentation,
            gpu_w,
            cpu_w,
        )


def simulate_gandiva(
    cluster: ClusterSpec,
    workload: Workload,
    config: GandivaConfig,
    rng: np.random.Generator,
    window_s: tuple[float, float] | None = None,
    order: QueueOrder = FIFO,
    placement: PlacementStrategy | None = None,
    backfill: bool = True,
    on_step: Callable[[float, Step], None] | None = None,
) -> SimResult:
    """Run Gandiva; ``window_s`` adds the GPU-seconds spent inside it (``window_*`` extras).

    Built objects only (``run.build`` builds them from a description): ``rng`` the run's
    Generator, ``order`` a queue order, ``placement`` a strategy that orders the servers
    within an affinity tier (None: least loaded first, Gandiva's own); ``backfill=False``
    stops each pass at the first queued job that finds no place, as ``--no-backfill`` does
    for the event mechanism; ``on_step`` sees every decider step."""
    sim = GandivaSimulator(
        cluster, workload, config, rng, window_s, order, placement, backfill, on_step=on_step
    )
    return sim.run()


def run_gandiva(
    cluster: ClusterSpec,
    workload: Workload,
    rng: np.random.Generator,
    *,
    order: QueueOrder = FIFO,
    placement: PlacementStrategy | None = None,
    backfill: bool = True,
    **config: Any,
) -> SimResult:
    """Run Gandiva on ``workload``; the other keywords are GandivaConfig's fields (an
    unknown name is a TypeError), ``rng``, ``order``, ``placement`` and ``backfill`` as in
    ``simulate_gandiva``."""
    return simulate_gandiva(
        cluster,
        workload,
        GandivaConfig(**config),
        rng,
        order=order,
        placement=placement,
        backfill=backfill,
    )
