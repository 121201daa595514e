"""Event-driven simulator: arrivals, a pending queue, placement, completions.

Jobs are non-preemptive here: once placed, a job holds its GPU shares until it has done
its work at the throughput of the GPU model it landed on. The clock-free
``SchedulingPass`` (``mechanisms/event``) decides who starts where; this driver runs it
after all events of one instant (arrivals and completions at the same time are seen
together) and models the progress of the jobs it started. Round-based scheduling
(Gavel) lives in ``mechanisms/rounds/sim/``; both return ``SimResult``.

The clock is this driver's own loop, not the generic ``sim.engine.Engine``: the only
events are completions (a heap of ``(time, sequence, job index)`` tuples, compared in C),
arrivals (read one ahead from the workload's stream, which is sorted by arrival) and
the scheduling pass (a flag: at most one pending, always at the current instant). At one
instant completions run first (in the order they were scheduled), then arrivals, then
the pass -- the order the engine's (time, priority, sequence) keys gave. Per-job
bookkeeping is kept in columns indexed by arrival order. A timeline sample records what
the driver knows (time, allocated milli, running, queued) and where the log of
allocations stood; the cluster's figures (fragmentation, power) of every sample are
worked out once at the end from that log (``results/timeline/log.py``).
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields

import numpy as np

from gpumosaic import cyclic_gc
from gpumosaic.mechanisms.admission import ever_fits
from gpumosaic.mechanisms.event.scheduling_pass import SchedulingPass, Shape, job_shape
from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement.base import PlacementStrategy
from gpumosaic.placement.filter import Reason, explain
from gpumosaic.placement.workload import TargetWorkload
from gpumosaic.policies.ordering import QueueOrder
from gpumosaic.results.outcome import Rejection, RejectReason
from gpumosaic.results.result import JobRecord, JobStatus, RunStats, SimResult
from gpumosaic.results.timeline.log import TimelineLog
from gpumosaic.sharing.interference import NoInterference
from gpumosaic.sharing.speed import InterferenceSpeed, SpeedModel
from gpumosaic.workloads.workload import Workload

ProgressCallback = Callable[[float], None]

_QUEUED, _RUNNING, _COMPLETED, _REJECTED = (
    JobStatus.QUEUED,
    JobStatus.RUNNING,
    JobStatus.COMPLETED,
    JobStatus.REJECTED,
)


@dataclass(slots=True)
class _Progress:
    """Progress of one started job under a non-ideal sharing model (only such runs make
    these): work left as of ``last_s`` at ``rate``, and the costs of sharing charged per
    second in its current company, with their totals."""

    job: JobSpec
    node: int
    gpus: tuple[int, ...]
    alone_rate: float
    rate: float
    remaining: float
    last_s: float
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
        *,
        rng: np.random.Generator,
        backfill: bool = True,
        target: TargetWorkload | None = None,
        until_s: float = math.inf,
        progress: ProgressCallback | None = None,
        speed: SpeedModel | None = None,
        initial_state: ClusterState | None = None,
    ) -> None:
        """Built objects only (``run.build`` builds them from a description). ``rng``: the
        run's Generator (placement ties, random placement). ``initial_state``: a state of
        ``cluster`` that already holds background load (``placement/background.py``); a fresh
        one when None."""
        self.state = initial_state if initial_state is not None else ClusterState(cluster)
        self.speed: SpeedModel = speed or InterferenceSpeed(NoInterference())
        self.workload = workload
        self.placement = placement
        self.order = order
        self.rng = rng
        self.backfill = backfill
        self.until_s = until_s
        self.progress = progress
        # Samples now, the cluster's figures for all of them once the run ends.
        self.timeline = TimelineLog(self.state, target)
        # A gang's progress under a non-ideal sharing model would need co-location on
        # several servers at once: only ideal models place jobs across servers.
        self.scheduling = SchedulingPass(placement, order, backfill, span_nodes=self.speed.ideal)
        self._ideal = self.speed.ideal
        self._node_gpu = [node.gpu for node in self.state.spec.nodes]
        self.now = 0.0
        self.events = 0
        # Completions: (finish time, sequence, job index). An entry whose sequence is no
        # longer the job's ``_completion_seq`` was re-timed by a sharing change: skipped.
        self._completions: list[tuple[float, int, int]] = []
        self._sequence = 0
        self._pass_pending = False
        self._arrivals: Iterator[JobSpec] = iter(workload.jobs)
        self._next_arrival: JobSpec | None = None  # read one ahead once the run starts
        # Per-job columns, indexed by arrival order.
        self._index: dict[int, int] = {}
        self._jobs: list[JobSpec] = []
        self._status: list[JobStatus] = []
        self._start_s: list[float] = []
        self._finish_s: list[float] = []
        self._gpu_model: list[str] = []
        self._alone_s: list[float] = []
        self._reason: list[str] = []
        self._rejection: dict[int, RejectReason] = {}  # a rejected job's typed reason
        self._placement: list[tuple[tuple[int, tuple[int, ...]], ...]] = []
        self._completion_seq: list[int] = []
        self._first_part: list[int] = []  # the timeline log's id of its first part
        self._progress: dict[int, _Progress] = {}  # non-ideal sharing only
        self._node_jobs: dict[int, list[int]] = {}  # non-ideal: job indexes per node
        # Whether a job of a shape can ever run (asked once per shape).
        self._admissible: dict[Shape, bool] = {}
        self._running = 0
        self._measured_left = (
            None if workload.measure is None else workload.measure[1] - workload.measure[0]
        )

    # -- events -------------------------------------------------------------------
    def _on_arrival(self, job: JobSpec) -> None:
        if job.id in self._index:
            raise ValueError(f"job id {job.id} arrives twice")
        job = self.speed.admit(job)
        index = len(self._jobs)
        self._index[job.id] = index
        self._jobs.append(job)
        self._start_s.append(math.nan)
        self._finish_s.append(math.nan)
        self._gpu_model.append("")
        self._alone_s.append(math.nan)
        self._placement.append(())
        self._completion_seq.append(-1)
        self._first_part.append(-1)
        shape = job_shape(job)
        admissible = self._admissible.get(shape)
        if admissible is None:
            admissible = admission(self.state, job, self.speed) is None
            self._admissible[shape] = admissible
        if admissible:
            self._status.append(_QUEUED)
            self._reason.append("")
            self.scheduling.add(job, shape)
            self._pass_pending = True
            return
        refusal = admission(self.state, job, self.speed)
        assert refusal is not None
        self._rejection[index] = refusal.reason
        reason = str(refusal)
        self._status.append(_REJECTED)
        self._reason.append(reason)
        self._job_done(job)

    def _on_completion(self, index: int) -> None:
        job = self._jobs[index]
        job_id = job.id
        if job_id in self.state.gangs:
            self.state.release_gang(job_id)
        else:
            self.state.release(job_id)
        placement = self._placement[index]
        nodes = [placement[0][0]] if len(placement) == 1 else [node for node, _ in placement]
        self.scheduling.released(self.state, nodes)
        self.timeline.released(self._first_part[index], len(placement))
        self._status[index] = _COMPLETED
        self._finish_s[index] = self.now
        self._running -= 1
        if not self._ideal:
            run = self._progress[index]
            self._settle(run)
            self._node_jobs[run.node].remove(index)
            self._rerate(run.node)
        self._job_done(job)
        self._pass_pending = True

    def _job_done(self, job: JobSpec) -> None:
        if self._measured_left is not None and self.workload.is_measured(job.id):
            self._measured_left -= 1

    def _scheduling_pass(self) -> None:
        self._pass_pending = False
        for job, parts in self.scheduling.run(self.state, self.rng):
            self._start(job, parts)
        self._record()

    def _schedule_completion(self, index: int, finish_s: float) -> None:
        sequence = self._sequence
        self._sequence = sequence + 1
        self._completion_seq[index] = sequence
        heapq.heappush(self._completions, (finish_s, sequence, index))

    def _start(self, job: JobSpec, parts: tuple[Assignment, ...]) -> None:
        """Start a job the pass placed (and allocated): model its progress."""
        assignment = parts[0]  # a gang's parts share one GPU model
        index = self._index[job.id]
        now = self.now
        gpu = self._node_gpu[assignment.node]
        rate = self.workload.throughputs.rate(job, gpu) * self.speed.solo_factor(job)
        if rate <= 0:
            raise ValueError(f"job {job.id} has throughput 0 on {gpu.name}")
        alone_s = job.work / rate
        self._start_s[index] = now
        self._gpu_model[index] = gpu.name
        self._status[index] = _RUNNING
        self._alone_s[index] = alone_s
        self._placement[index] = tuple((part.node, part.gpus) for part in parts)
        self._first_part[index] = self.timeline.allocated(parts)
        self._running += 1
        if self._ideal:
            finish_s = now + alone_s
            self._finish_s[index] = finish_s
            self._schedule_completion(index, finish_s)
            return
        node = assignment.node
        self._progress[index] = _Progress(job, node, assignment.gpus, rate, rate, job.work, now)
        self._node_jobs.setdefault(node, []).append(index)
        self._rerate(node)

    def _settle(self, run: _Progress) -> None:
        """Charge progress and sharing costs since ``last_s`` at the current rates."""
        now = self.now
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
        now = self.now
        indexes = self._node_jobs.get(node, [])
        runs = self._progress
        factor = dict.fromkeys(indexes, 1.0)
        gpu = self.state.spec.nodes[node].gpu
        for index in indexes:
            run = runs[index]
            self._settle(run)
            run.waiting_share = run.thrashing_share = run.handovers_per_s = 0.0
        for slot in {g for index in indexes for g in runs[index].gpus}:
            on_slot = [i for i in indexes if slot in runs[i].gpus]
            if len(on_slot) < 2:
                continue
            company = [runs[i] for i in on_slot]
            shared = self.speed.factors(
                [r.job for r in company], [r.remaining / r.alone_rate for r in company], gpu
            )
            for k, index in enumerate(on_slot):
                run = company[k]
                factor[index] = min(factor[index], float(shared.speeds[k]))
                run.waiting_share = max(run.waiting_share, float(shared.waiting_share[k]))
                run.thrashing_share = max(run.thrashing_share, float(shared.thrashing_share[k]))
                run.handovers_per_s += float(shared.handovers_per_s[k])
        for index in indexes:
            run = runs[index]
            rate = run.alone_rate * max(factor[index], 1e-12)
            scheduled = self._completion_seq[index] >= 0
            if scheduled and rate == run.rate:
                continue
            run.rate = rate
            self._schedule_completion(index, now + run.remaining / rate)

    def _record(self) -> None:
        self.timeline.sample(
            self.now, self.state.allocated_gpu_milli, self._running, len(self.scheduling)
        )
        if self.progress is not None:
            self.progress(self._progress_fraction())

    def _progress_fraction(self) -> float:
        if self._measured_left is not None and self.workload.measure is not None:
            size = self.workload.measure[1] - self.workload.measure[0]
            return 1.0 - self._measured_left / size
        return 0.0

    # -- run ----------------------------------------------------------------------
    def run(self) -> SimResult:
        # The run makes a few objects per job and frees them by reference counting; it
        # makes no reference cycles, so the cyclic collector would only re-scan every
        # live job's objects again and again (~15% of the openb replay's simulation).
        with cyclic_gc.paused():
            return self._run()

    def _run(self) -> SimResult:
        wall = time.perf_counter()
        self._record()
        arrivals = self._arrivals
        self._next_arrival = arrival = next(arrivals, None)
        heap, live, until_s, inf = self._completions, self._completion_seq, self.until_s, math.inf
        heappop = heapq.heappop
        on_completion, on_arrival = self._on_completion, self._on_arrival
        while self._measured_left is None or self._measured_left > 0:
            # The next live completion (re-timed entries are dropped), or +inf.
            completion_s = inf
            while heap:
                finish_s, sequence, index = heap[0]
                if live[index] == sequence:
                    completion_s = finish_s
                    break
                heappop(heap)
            arrival_s = inf if arrival is None else arrival.arrival_s
            # Same instant: completions, then arrivals, then the pass (always at ``now``).
            pass_pending = self._pass_pending
            if completion_s <= arrival_s and (not pass_pending or completion_s <= self.now):
                if completion_s == inf or completion_s > until_s:
                    break
                self.now = completion_s
                self.events += 1
                on_completion(heappop(heap)[2])
            elif not pass_pending or arrival_s <= self.now:
                assert arrival is not None  # arrival_s < completion_s <= inf
                if arrival_s > until_s:
                    break
                if arrival_s < self.now:
                    raise ValueError(
                        f"job {arrival.id} arrives at {arrival_s} before the previous "
                        f"arrival at {self.now}: the workload must be sorted by arrival"
                    )
                self.now = arrival_s
                self.events += 1
                on_arrival(arrival)
                self._next_arrival = arrival = next(arrivals, None)
            else:
                if self.now > until_s:
                    break
                self.events += 1
                self._scheduling_pass()
        stats = RunStats(events=self.events, elapsed_s=time.perf_counter() - wall)
        return SimResult(
            records=self._records(self.now),
            timeline=self.timeline.freeze(),
            stats=stats,
            total_gpu_milli=self.state.total_gpu_milli,
            end_s=self.now,
            fallbacks=self.speed.fallbacks(),
        )

    def _records(self, end_s: float) -> tuple[JobRecord, ...]:
        """One record per arrived job, by job id: the columns gathered in id order and
        the figures worked out column-wise (the same float operations as per record),
        a chunk of jobs at a time (the Python columns of a chunk only)."""
        jobs, status = self._jobs, self._status
        order = np.argsort(np.fromiter((job.id for job in jobs), np.int64, len(jobs)))
        by_id = order.tolist()
        jobs = list(map(jobs.__getitem__, by_id))
        status = list(map(status.__getitem__, by_id))
        start = np.array(self._start_s, dtype=np.float64)[order]
        finish = np.array(self._finish_s, dtype=np.float64)[order]
        completed = np.array([s is _COMPLETED for s in status], dtype=bool)
        running = np.array([s is _RUNNING for s in status], dtype=bool)
        held = np.where(completed, finish - start, np.where(running, end_s - start, 0.0))
        total_milli = np.fromiter((job.total_gpu_milli for job in jobs), np.int64, len(jobs))
        milli_seconds = total_milli * held
        reasons = list(map(self._reason.__getitem__, by_id))
        for k, state in enumerate(status):
            if state is _QUEUED and not reasons[k]:
                reasons[k] = _pending_reason(self.state, jobs[k])
        suspended, thrashing, handovers = [0.0] * len(jobs), [0.0] * len(jobs), [0] * len(jobs)
        position = np.empty_like(order)
        position[order] = np.arange(len(order))
        for index, run in self._progress.items():
            k = int(position[index])
            suspended[k], thrashing[k] = run.waiting_s, run.thrashing_s
            handovers[k] = round(run.handovers)
        is_measured = self.workload.is_measured
        records: list[JobRecord] = []
        for lo in range(0, len(jobs), _RECORD_CHUNK):
            part = slice(lo, lo + _RECORD_CHUNK)
            chunk = jobs[part]
            ids = [job.id for job in chunk]
            columns = {
                "job_id": ids,
                "name": [job.name for job in chunk],
                "job_type": [job.job_type for job in chunk],
                "arrival_s": [job.arrival_s for job in chunk],
                # The simulator's own float objects where the value is theirs.
                "start_s": list(map(self._start_s.__getitem__, by_id[part])),
                "finish_s": [
                    self._finish_s[i] if done else math.nan
                    for i, done in zip(by_id[part], completed[part].tolist(), strict=True)
                ],
                "num_gpu": [job.num_gpu for job in chunk],
                "gpu_milli": [job.gpu_milli for job in chunk],
                "status": status[part],
                "reason": reasons[part],
                "rejection": [self._rejection.get(i) for i in by_id[part]],
                "gpu_model": list(map(self._gpu_model.__getitem__, by_id[part])),
                "measured": [is_measured(job_id) for job_id in ids],
                "gpu_milli_seconds": milli_seconds[part].tolist(),
                "alone_s": list(map(self._alone_s.__getitem__, by_id[part])),
                "suspended_s": suspended[part],
                "migrations": [0] * len(chunk),
                "thrashing_s": thrashing[part],
                "handovers": handovers[part],
                "placement": list(map(self._placement.__getitem__, by_id[part])),
            }
            records.extend(map(JobRecord, *(columns[name] for name in _RECORD_FIELDS)))
        return tuple(records)


def admission(state: ClusterState, job: JobSpec, speed: SpeedModel) -> Rejection | None:
    """The one admission rule (``mechanisms/admission.py``): the event mechanism spans
    servers with a gang where the speed model is ideal (a shared model has no words for
    a job across servers)."""
    return ever_fits(
        state,
        job,
        spans=speed.ideal,
        why_not_span=f"spanning servers is not modelled under --sharing {speed.name}",
    )


_RECORD_CHUNK = 8192
# JobRecord's fields in order (its constructor is called positionally, column-wise).
_RECORD_FIELDS = tuple(f.name for f in fields(JobRecord))


def _pending_reason(state: ClusterState, job: JobSpec) -> str:
    verdict = explain(state, job)
    if verdict.reason is Reason.GPU:
        return f"waiting: {verdict.detail}"
    return f"waiting ({verdict.reason.value}): {verdict.detail}"
