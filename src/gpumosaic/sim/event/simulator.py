"""Event-driven simulator: arrivals, a pending queue, placement, completions.

Jobs are non-preemptive here: once placed, a job holds its GPU shares until it has done
its work at the throughput of the GPU model it landed on. The clock-free
``SchedulingPass`` (``mechanisms/event``) decides who starts where; this driver runs it
after all events of one instant (arrivals and completions at the same time are seen
together) and models the progress of the jobs it started. Round-based scheduling
(Gavel) lives in ``sim/rounds/``; both return ``SimResult``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial

import numpy as np

from gpumosaic.mechanisms.event.scheduling_pass import SchedulingPass
from gpumosaic.mechanisms.gang import could_span
from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement.base import PlacementStrategy
from gpumosaic.placement.filter import Reason, explain
from gpumosaic.placement.workload import TargetWorkload
from gpumosaic.policies.ordering import QueueOrder, build_queue_order
from gpumosaic.sharing.interference import NoInterference
from gpumosaic.sharing.speed import InterferenceSpeed, SpeedModel
from gpumosaic.sim.engine import Engine, EventHandle
from gpumosaic.sim.event.tracker import ClusterTracker
from gpumosaic.sim.result import (
    JobRecord,
    JobStatus,
    RunStats,
    SimResult,
    TimelineRecorder,
)
from gpumosaic.workloads.workload import Workload

# Same-instant events: completions free resources before arrivals join the queue, and
# the scheduling pass runs last.
_COMPLETION, _ARRIVAL, _PASS = 0, 1, 2

ProgressCallback = Callable[[float], None]


@dataclass(slots=True)
class _JobRun:
    """Mutable per-job bookkeeping, owned by the simulator alone."""

    job: JobSpec
    start_s: float = math.nan
    finish_s: float = math.nan
    gpu_model: str = ""
    alone_s: float = math.nan
    status: JobStatus = JobStatus.QUEUED
    reason: str = ""
    # Progress under a non-ideal sharing model: work left as of ``last_s`` at ``rate``.
    node: int = -1
    gpus: tuple[int, ...] = ()
    placement: tuple[tuple[int, tuple[int, ...]], ...] = ()  # every part: (node, GPU slots)
    alone_rate: float = math.nan
    rate: float = math.nan
    remaining: float = math.nan
    last_s: float = math.nan
    completion: EventHandle | None = None
    # Costs of sharing charged per second in the current company, and their totals.
    waiting_share: float = 0.0
    thrashing_share: float = 0.0
    handovers_per_s: float = 0.0
    waiting_s: float = 0.0
    thrashing_s: float = 0.0
    handovers: float = 0.0


class EventSimulator:
    def __init__(
        self,
        cluster: ClusterSpec,
        workload: Workload,
        placement: PlacementStrategy,
        order: QueueOrder,
        seed: int = 0,
        backfill: bool = True,
        target: TargetWorkload | None = None,
        until_s: float = math.inf,
        progress: ProgressCallback | None = None,
        speed: SpeedModel | None = None,
        rng: np.random.Generator | None = None,
        initial_state: ClusterState | None = None,
    ) -> None:
        """``rng``: the run's Generator (placement ties, random placement); when None,
        one seeded from ``seed``. ``initial_state``: a state of ``cluster`` that already
        holds background load (``sim/background.py``); a fresh one when None."""
        self.state = initial_state if initial_state is not None else ClusterState(cluster)
        self.speed: SpeedModel = speed or InterferenceSpeed(NoInterference())
        self._node_jobs: dict[int, list[int]] = {}
        self.workload = workload
        self.placement = placement
        self.order = order
        self.rng = rng if rng is not None else np.random.default_rng(seed)
        self.backfill = backfill
        self.until_s = until_s
        self.progress = progress
        self.engine = Engine()
        self.tracker = ClusterTracker(self.state, target)
        self.timeline = TimelineRecorder()
        self.runs: dict[int, _JobRun] = {}
        # A gang's progress under a non-ideal sharing model would need co-location on
        # several servers at once: only ideal models place jobs across servers.
        self.scheduling = SchedulingPass(placement, order, backfill, span_nodes=self.speed.ideal)
        self._running = 0
        self._pass_scheduled = False
        self._arrivals: Iterator[JobSpec] = iter(workload.jobs)
        self._measured_left = (
            None if workload.measure is None else workload.measure[1] - workload.measure[0]
        )
        self._arrived = 0
        self._finished = 0

    # -- events -------------------------------------------------------------------
    def _schedule_next_arrival(self) -> None:
        job = next(self._arrivals, None)
        if job is None:
            return
        self.engine.schedule(job.arrival_s, lambda: self._on_arrival(job), _ARRIVAL)

    def _on_arrival(self, job: JobSpec) -> None:
        if job.id in self.runs:
            raise ValueError(f"job id {job.id} arrives twice")
        self._arrived += 1
        job = self.speed.admit(job)
        run = _JobRun(job)
        self.runs[job.id] = run
        fits = self.state.fits_when_empty(job)
        if not fits and not (self.speed.ideal and could_span(self.state, job)):
            verdict = explain(self.state, job)
            run.status, run.reason = JobStatus.REJECTED, f"{verdict.reason.value}: {verdict.detail}"
            if job.may_span_nodes and could_span(self.state, job):
                run.reason += (
                    f" (spanning servers is not modelled under --sharing {self.speed.name})"
                )
            self._job_done(job)
        else:
            self.scheduling.add(job)
            self._request_pass()
        if not self._stop_reached():
            self._schedule_next_arrival()

    def _on_completion(self, job_id: int) -> None:
        run = self.runs[job_id]
        if job_id in self.state.gangs:
            self.state.release_gang(job_id)
        else:
            self.state.release(job_id)
        run.status = JobStatus.COMPLETED
        run.finish_s = self.engine.now
        self._running -= 1
        if not self.speed.ideal:
            self._settle(run)
            self._node_jobs[run.node].remove(job_id)
            self._rerate(run.node)
        self._job_done(run.job)
        self._request_pass()

    def _job_done(self, job: JobSpec) -> None:
        self._finished += 1
        if self._measured_left is not None and self.workload.is_measured(job.id):
            self._measured_left -= 1

    def _request_pass(self) -> None:
        if not self._pass_scheduled:
            self._pass_scheduled = True
            self.engine.schedule(self.engine.now, self._scheduling_pass, _PASS)

    def _scheduling_pass(self) -> None:
        self._pass_scheduled = False
        for job, parts in self.scheduling.run(self.state, self.rng):
            self._start(job, parts)
        self._record()

    def _start(self, job: JobSpec, parts: tuple[Assignment, ...]) -> None:
        """Start a job the pass placed (and allocated): model its progress."""
        assignment = parts[0]  # a gang's parts share one GPU model
        run = self.runs[job.id]
        now = self.engine.now
        gpu = self.state.spec.nodes[assignment.node].gpu
        rate = self.workload.throughputs.rate(job, gpu) * self.speed.solo_factor(job)
        if rate <= 0:
            raise ValueError(f"job {job.id} has throughput 0 on {gpu.name}")
        run.start_s, run.gpu_model, run.status = now, gpu.name, JobStatus.RUNNING
        run.alone_s = job.work / rate
        run.placement = tuple((part.node, part.gpus) for part in parts)
        self._running += 1
        if self.speed.ideal:
            run.finish_s = now + run.alone_s
            self.engine.schedule(run.finish_s, lambda: self._on_completion(job.id), _COMPLETION)
            return
        run.node, run.gpus = assignment.node, assignment.gpus
        run.alone_rate, run.rate, run.remaining, run.last_s = rate, rate, job.work, now
        self._node_jobs.setdefault(assignment.node, []).append(job.id)
        self._rerate(assignment.node)

    def _settle(self, run: _JobRun) -> None:
        """Charge progress and sharing costs since ``last_s`` at the current rates."""
        now = self.engine.now
        elapsed = now - run.last_s
        run.remaining = max(run.remaining - run.rate * elapsed, 0.0)
        run.waiting_s += run.waiting_share * elapsed
        run.thrashing_s += run.thrashing_share * elapsed
        run.handovers += run.handovers_per_s * elapsed
        run.last_s = now

    def _rerate(self, node: int) -> None:
        """Co-location on ``node`` changed: settle each job's progress at its old speed,
        ask the sharing model for new speeds (a job spanning several GPUs runs at its
        slowest GPU's pace) and move its completion to match."""
        now = self.engine.now
        job_ids = self._node_jobs.get(node, [])
        factor = dict.fromkeys(job_ids, 1.0)
        gpu = self.state.spec.nodes[node].gpu
        for job_id in job_ids:
            run = self.runs[job_id]
            self._settle(run)
            run.waiting_share = run.thrashing_share = run.handovers_per_s = 0.0
        for slot in {g for job_id in job_ids for g in self.runs[job_id].gpus}:
            on_slot = [self.runs[j] for j in job_ids if slot in self.runs[j].gpus]
            if len(on_slot) < 2:
                continue
            shared = self.speed.factors(
                [r.job for r in on_slot], [r.remaining / r.alone_rate for r in on_slot], gpu
            )
            for i, run in enumerate(on_slot):
                factor[run.job.id] = min(factor[run.job.id], float(shared.speeds[i]))
                run.waiting_share = max(run.waiting_share, float(shared.waiting_share[i]))
                run.thrashing_share = max(run.thrashing_share, float(shared.thrashing_share[i]))
                run.handovers_per_s += float(shared.handovers_per_s[i])
        for job_id in job_ids:
            run = self.runs[job_id]
            rate = run.alone_rate * max(factor[job_id], 1e-12)
            if run.completion is not None and rate == run.rate:
                continue
            if run.completion is not None:
                run.completion.cancel()
            run.rate = rate
            finish = now + run.remaining / rate
            run.completion = self.engine.schedule(
                finish, partial(self._on_completion, job_id), _COMPLETION
            )

    def _record(self) -> None:
        gpu_w, cpu_w = self.tracker.power_w
        self.timeline.record(
            self.engine.now,
            self.tracker.allocated_milli,
            self._running,
            len(self.scheduling),
            self.tracker.fragmentation_rate,
            gpu_w,
            cpu_w,
        )
        if self.progress is not None:
            self.progress(self._progress_fraction())

    def _progress_fraction(self) -> float:
        if self._measured_left is not None and self.workload.measure is not None:
            size = self.workload.measure[1] - self.workload.measure[0]
            return 1.0 - self._measured_left / size
        return 0.0

    def _stop_reached(self) -> bool:
        return self._measured_left is not None and self._measured_left <= 0

    # -- run ----------------------------------------------------------------------
    def run(self) -> SimResult:
        wall = time.perf_counter()
        self._schedule_next_arrival()
        self._record()
        engine = self.engine
        while not self._stop_reached():
            next_time = engine.peek()
            if next_time == math.inf or next_time > self.until_s:
                break
            engine.step()
        end_s = engine.now
        stats = RunStats(events=engine.events_processed, elapsed_s=time.perf_counter() - wall)
        return SimResult(
            records=self._records(end_s),
            timeline=self.timeline.freeze(),
            stats=stats,
            total_gpu_milli=self.state.total_gpu_milli,
            end_s=end_s,
            fallbacks=self.speed.fallbacks(),
        )

    def _records(self, end_s: float) -> tuple[JobRecord, ...]:
        out: list[JobRecord] = []
        pending_ids = {job.id for job in self.scheduling.pending()}
        for job_id in sorted(self.runs):
            run = self.runs[job_id]
            job = run.job
            reason = run.reason
            if job_id in pending_ids and not reason:
                reason = _pending_reason(self.state, job)
            if run.status is JobStatus.COMPLETED:
                held_s = run.finish_s - run.start_s
            elif run.status is JobStatus.RUNNING:
                held_s = end_s - run.start_s
            else:
                held_s = 0.0
            out.append(
                JobRecord(
                    job_id=job.id,
                    name=job.name,
                    job_type=job.job_type,
                    arrival_s=job.arrival_s,
                    start_s=run.start_s,
                    finish_s=run.finish_s if run.status == JobStatus.COMPLETED else math.nan,
                    num_gpu=job.num_gpu,
                    gpu_milli=job.gpu_milli,
                    status=run.status,
                    reason=reason,
                    gpu_model=run.gpu_model,
                    measured=self.workload.is_measured(job.id),
                    gpu_milli_seconds=job.total_gpu_milli * held_s,
                    alone_s=run.alone_s,
                    suspended_s=run.waiting_s,
                    thrashing_s=run.thrashing_s,
                    handovers=round(run.handovers),
                    placement=run.placement,
                )
            )
        return tuple(out)


def _pending_reason(state: ClusterState, job: JobSpec) -> str:
    verdict = explain(state, job)
    if verdict.reason is Reason.GPU:
        return f"waiting: {verdict.detail}"
    return f"waiting ({verdict.reason.value}): {verdict.detail}"


def simulate(
    cluster: ClusterSpec,
    workload: Workload,
    placement: PlacementStrategy | str = "fgd",
    order: QueueOrder | str = "fifo",
    seed: int = 0,
    backfill: bool = True,
    until_s: float = math.inf,
    progress: ProgressCallback | None = None,
    speed: SpeedModel | None = None,
) -> SimResult:
    """Run the event-driven simulator. String placements are built with the target
    workload taken from the workload's jobs (what FGD needs)."""
    target = TargetWorkload.from_jobs(workload.target_sample())
    if isinstance(placement, str):
        from gpumosaic.placement.registry import build_placement

        placement = build_placement(placement, target)
    if isinstance(order, str):
        order = build_queue_order(order)
    sim = EventSimulator(
        cluster,
        workload,
        placement,
        order,
        seed=seed,
        backfill=backfill,
        target=target,
        until_s=until_s,
        progress=progress,
        speed=speed,
    )
    return sim.run()
