"""Gandiva (OSDI'18) as a simulator: affinity placement, suspend-resume time-slicing,
introspective packing and migration over the event engine and ClusterState.

Each mechanism can be switched off (GandivaConfig). The simulator owns the jobs (arrived,
queued, rejected) and the counts of what happened; ``GpuSets`` (``servers``) owns the
GPU sets, the servers' affinities and ClusterState.

Scheduling happens at arrivals, finishes and pack verdicts, in this order: place queued
jobs (in the queue order -- fifo, sjf or priority, the event simulator's objects --
by affinity tier; a multi-GPU job that finds free GPUs only scattered triggers a
defragmenting migration; then oversubscription), spread time-sliced jobs onto GPUs that
became free (and split packed pairs when GPUs are free), then pack waiting jobs.
Within a tier the server is the least loaded one, or the best by a named placement
strategy's scores (``ranking``).
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.job import JobSpec
from gpumosaic.model.power import PowerTracker
from gpumosaic.model.state import BookkeepingError
from gpumosaic.placement.base import PlacementStrategy
from gpumosaic.placement.filter import explain
from gpumosaic.placement.fragmentation import shared_tracker
from gpumosaic.policies.ordering import QueueOrder, SortKey, build_queue_order
from gpumosaic.sim.engine import Engine
from gpumosaic.sim.gandiva.affinity import ChoiceKind, Rank, choose_server
from gpumosaic.sim.gandiva.config import GandivaConfig
from gpumosaic.sim.gandiva.counters import GandivaCounters
from gpumosaic.sim.gandiva.group import GpuGroup, JobRun
from gpumosaic.sim.gandiva.moves import defragment, spread
from gpumosaic.sim.gandiva.packing import BadPair, pack_waiting_jobs
from gpumosaic.sim.gandiva.ranking import gandiva_target, tier_ranker
from gpumosaic.sim.gandiva.rates import RateModel
from gpumosaic.sim.gandiva.records import Snapshot, build_result
from gpumosaic.sim.gandiva.servers import GpuSets
from gpumosaic.sim.result import RunStats, SimResult, TimelineRecorder
from gpumosaic.workloads.workload import Workload

ARRIVAL_PRIORITY = 1  # at equal times, finishes (priority 0) free GPUs before arrivals


class GandivaSimulator:
    def __init__(
        self,
        cluster: ClusterSpec,
        workload: Workload,
        config: GandivaConfig,
        seed: int,
        window_s: tuple[float, float] | None = None,
        order: QueueOrder | str = "fifo",
        placement: PlacementStrategy | str | None = None,
        backfill: bool = True,
    ) -> None:
        self.cluster = cluster
        # GPU-seconds are also snapshot at the window's ends, so utilization can be measured
        # over the loaded part of a run rather than up to the last straggler's finish.
        self.window_s = window_s
        self.snapshots: list[Snapshot] = []
        self.workload = workload
        self.config = config
        self.rng = np.random.default_rng(seed)
        self.engine = Engine()
        self.rates = RateModel(workload.throughputs)
        self.timeline = TimelineRecorder()
        server_order = [int(i) for i in self.rng.permutation(len(cluster.nodes))]
        self.sets = GpuSets(
            cluster, self.rates, config, self.engine, self._on_group_event,
            server_order,
        )  # fmt: skip
        self.queue_order = build_queue_order(order) if isinstance(order, str) else order
        self.backfill = backfill  # False: a job that finds no place blocks those behind it
        # None: least loaded first within a tier (Gandiva's own order).
        self.ranker = tier_ranker(placement, workload, self.sets.state, self.rng)
        # Fragmentation is measured against the same job shapes as every other simulator's.
        self.target = gandiva_target(workload.target_sample())
        self.power = PowerTracker(self.sets.state)
        self.runs: dict[int, JobRun] = {}
        self.queue: list[JobRun] = []
        self.rejected: dict[int, str] = {}
        self.counters = GandivaCounters()
        self.bad_pairs: set[BadPair] = set()  # undone pairs, never tried again on that model
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
        self.sets.settle_all(self.engine.now)
        while self.window_s is not None and len(self.snapshots) < 2:
            self._snapshot()  # the run ended before the window did
        return build_result(
            runs=self.runs.values(),
            queued=self.queue,
            rejected=self.rejected,
            is_measured=self.workload.is_measured,
            counters=self.counters,
            ledger=self.sets.ledger,
            held_gpu_s=self.sets.held_gpu_s,
            snapshots=self.snapshots,
            timeline=self.timeline.freeze(),
            total_gpu_milli=self.sets.state.total_gpu_milli,
            end_s=self.engine.now,
            stats=RunStats(
                events=self.engine.events_processed, elapsed_s=time.perf_counter() - started
            ),
        )

    def _snapshot(self) -> None:
        if len(self.snapshots) < 2:
            self.sets.settle_all(self.engine.now)
            self.snapshots.append(
                (self.engine.now, replace(self.sets.ledger), self.sets.held_gpu_s)
            )

    def check(self) -> None:
        """Bookkeeping invariants: state, groups and jobs agree (tests run this always)."""
        placed = self.sets.check()
        active = sum(1 for r in self.runs.values() if r.group >= 0)
        if active != placed or any(r.group >= 0 for r in self.queue):
            raise BookkeepingError("a job is in two places or none")

    # --- events -----------------------------------------------------------------------

    def _schedule_next_arrival(self) -> None:
        job = next(self._jobs, None)
        if job is not None:
            self.engine.schedule(job.arrival_s, lambda: self._on_arrival(job), ARRIVAL_PRIORITY)

    def _on_arrival(self, job: JobSpec) -> None:
        run = JobRun(job)
        self.runs[job.id] = run
        if job.num_gpu == 0:
            self._reject(run, "cpu_only: gandiva schedules GPU jobs only")
        elif not self.sets.state.fits_when_empty(job):
            verdict = explain(self.sets.state, job)
            self._reject(run, f"{verdict.reason.value}: {verdict.detail}")
        elif (unmeasured := self.rates.unmeasured(job, self.cluster.gpu_models)) is not None:
            self._reject(run, f"no_throughput: {job.job_type} has no speed on {unmeasured}")
        elif not self.usable(job).any():
            self._reject(run, f"no_throughput: {job.job_type} runs at speed 0 on its GPU models")
        else:
            self._enqueue(run)
            self._schedule_pass()
        self._schedule_next_arrival()

    def _reject(self, run: JobRun, reason: str) -> None:
        self.rejected[run.spec.id] = reason
        self._count_measured(run)

    def _count_measured(self, run: JobRun) -> None:
        if self._measured_left is not None and self.workload.is_measured(run.spec.id):
            self._measured_left -= 1

    def _on_group_event(self, gid: int) -> None:
        now = self.engine.now
        group = self.sets[gid]
        events = group.fire(now)
        for job in events.finished:
            job.group = -1
            self._count_measured(job)
        for guest, host in events.undone:
            self.bad_pairs.add((frozenset((guest.spec.id, host.spec.id)), group.gpu.name))
            if not self.config.time_slicing:
                group.remove(guest, now)  # no time-slicing: back to the queue
                self._enqueue(guest)
        if events.kept or events.undone:
            self.counters += GandivaCounters(
                packs_kept=len(events.kept), packs_undone=len(events.undone)
            )
        if not group.units:
            self.sets.close(group, now)
        else:
            self.sets.replan(group)
        if events.finished or events.undone:
            self._schedule_pass()

    def _enqueue(self, run: JobRun) -> None:
        # The queue stays sorted by the queue order's key, then id, as the event simulator's.
        bisect.insort(self.queue, run, key=self._queue_key)

    def _queue_key(self, run: JobRun) -> tuple[SortKey, int]:
        return (self.queue_order.key(run.spec), run.spec.id)

    # --- scheduling pass ----------------------------------------------------------------

    def _schedule_pass(self) -> None:
        now = self.engine.now
        # A job shape that found no place will not find one for a later job in this pass.
        no_place: set[tuple[int, frozenset[str] | None]] = set()
        placed: list[JobRun] = []
        for run in self.queue:
            shape = (max(1, run.spec.num_gpu), run.spec.allowed_models)
            if shape in no_place:
                continue
            if self._place(run, now):
                placed.append(run)
            elif not self.backfill:
                break
            else:
                no_place.add(shape)
        if placed:
            done = {id(r) for r in placed}
            self.queue = [r for r in self.queue if id(r) not in done]
        self.counters += spread(self.sets, now, self.config, self._free_elsewhere)
        if self.config.packing and self.rates.measures_pairs:
            self._pack(now)
        self._record(now)

    def _place(self, run: JobRun, now: float) -> bool:
        k = max(1, run.spec.num_gpu)
        allowed = self.usable(run.spec)
        views = self.sets.views(k, allowed)
        share = self.config.max_share
        rank = self.rank(run.spec, k)
        choice = choose_server(views, k, oversubscribe=False, max_share=share, rank=rank)
        if choice is None and self.config.migration and k > 1:
            moved = defragment(self.sets, allowed, k, now)
            if moved is not None:
                self.counters += moved
                views = self.sets.views(k, allowed)
                choice = choose_server(views, k, oversubscribe=False, max_share=share, rank=rank)
        if choice is None and self.config.time_slicing:
            choice = choose_server(views, k, oversubscribe=True, max_share=share, rank=rank)
        if choice is None:
            return False
        if choice.kind is ChoiceKind.OVERSUBSCRIBE:
            group = self.sets[choice.group]
        else:
            group = self.sets.open(choice.node, k, now)
        group.add(run, now, resume_cost_s=0.0)
        self._started(run, group)
        self.sets.replan(group)
        return True

    def _free_elsewhere(self, job: JobSpec, k: int, avoid: int) -> int | None:
        """A server other than ``avoid`` with k free GPUs, by the affinity order."""
        views = [v for v in self.sets.views(k, self.usable(job)) if v.node != avoid]
        share, rank = self.config.max_share, self.rank(job, k)
        choice = choose_server(views, k, oversubscribe=False, max_share=share, rank=rank)
        return None if choice is None else choice.node

    def _pack(self, now: float) -> None:
        outcome = pack_waiting_jobs(
            self.sets,
            self.queue,
            rates=self.rates,
            config=self.config,
            bad_pairs=self.bad_pairs,
            usable=self.usable,
            reference=self.cluster.gpu_models[0],
            now=now,
        )
        for packed in outcome.packed:
            if packed.from_queue:
                self.queue.remove(packed.guest)
            self._started(packed.guest, packed.group)
        self.counters += GandivaCounters(packs_tried=len(outcome.packed))
        for group in outcome.changed:
            self.sets.replan(group)

    def _started(self, run: JobRun, group: GpuGroup) -> None:
        if math.isnan(run.start_s):
            run.start_s = self.engine.now
            run.first_model = group.gpu.name
            run.alone_s = run.spec.work / self.rates.alone(run.spec, group.gpu)

    def usable(self, job: JobSpec) -> npt.NDArray[np.bool_]:
        """Servers whose GPU model the job allows and runs it on at a positive speed."""
        runs = self.rates.runs_on(job, self.cluster.gpu_models)
        return np.array(runs, dtype=bool)[self.sets.state.node_model]

    def rank(self, job: JobSpec, k: int) -> Rank | None:
        """The order within an affinity tier: None (least loaded) or the named strategy's."""
        return None if self.ranker is None else self.ranker.rank(job, k)

    def _record(self, now: float) -> None:
        state = self.sets.state
        gpu_w, cpu_w = self.power.power_w
        fragmentation = shared_tracker(state, self.target).rate()
        self.timeline.record(
            now,
            float(state.allocated_gpu_milli),
            self.sets.running_jobs(now),
            len(self.queue),
            fragmentation,
            gpu_w,
            cpu_w,
        )


def simulate_gandiva(
    cluster: ClusterSpec,
    workload: Workload,
    config: GandivaConfig,
    seed: int = 0,
    window_s: tuple[float, float] | None = None,
    order: QueueOrder | str = "fifo",
    placement: PlacementStrategy | str | None = None,
    backfill: bool = True,
) -> SimResult:
    """Run Gandiva; ``window_s`` adds the GPU-seconds spent inside it (``window_*`` extras).

    ``order`` is a queue order (``fifo``, ``sjf``, ``priority``); ``placement`` a registry
    strategy that orders the servers within an affinity tier (None or ``affinity``:
    least loaded first, Gandiva's own); ``backfill=False`` stops each pass at the first
    queued job that finds no place, as ``--no-backfill`` does for the event mechanism."""
    sim = GandivaSimulator(cluster, workload, config, seed, window_s, order, placement, backfill)
    return sim.run()


def run_gandiva(
    cluster: ClusterSpec,
    workload: Workload,
    seed: int = 0,
    *,
    order: QueueOrder | str = "fifo",
    placement: PlacementStrategy | str | None = None,
    backfill: bool = True,
    **config: Any,
) -> SimResult:
    """Run Gandiva on ``workload``; the other keywords are GandivaConfig's fields (an
    unknown name is a TypeError), ``order``, ``placement`` and ``backfill`` as in
    ``simulate_gandiva``."""
    return simulate_gandiva(
        cluster,
        workload,
        GandivaConfig(**config),
        seed,
        order=order,
        placement=placement,
        backfill=backfill,
    )
