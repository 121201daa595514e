"""Gandiva (OSDI'18) as a simulator: affinity placement, suspend-resume time-slicing,
introspective packing and migration over the event engine and ClusterState.

Each mechanism can be switched off (GandivaConfig). A GPU set held by a group appears in
ClusterState as one assignment with the pseudo job id ``-(gid + 1)``: ClusterState keeps
"which GPUs are held", the groups keep "which jobs take turns on them".

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

from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.job import JobSpec
from gpumosaic.model.power import cluster_power_w
from gpumosaic.model.state import Assignment, BookkeepingError, ClusterState
from gpumosaic.placement.base import PlacementStrategy
from gpumosaic.placement.filter import explain
from gpumosaic.placement.fragmentation import shared_tracker
from gpumosaic.policies.ordering import QueueOrder, SortKey, build_queue_order
from gpumosaic.sim.engine import Engine
from gpumosaic.sim.gandiva.affinity import ChoiceKind, Rank, ServerView, choose_server
from gpumosaic.sim.gandiva.config import GandivaConfig
from gpumosaic.sim.gandiva.group import GpuGroup, JobRun, Ledger
from gpumosaic.sim.gandiva.moves import defragment, spread
from gpumosaic.sim.gandiva.packing import PackCounters, pack_waiting_jobs
from gpumosaic.sim.gandiva.ranking import gandiva_target, tier_ranker
from gpumosaic.sim.gandiva.rates import RateModel
from gpumosaic.sim.gandiva.records import build_result
from gpumosaic.sim.result import SimResult, TimelineRecorder
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
        self.snapshots: list[tuple[float, Ledger, float]] = []  # (time, ledger, held GPU-s)
        self.workload = workload
        self.config = config
        self.rng = np.random.default_rng(seed)
        self.engine = Engine()
        self.state = ClusterState(cluster)
        self.rates = RateModel(workload.throughputs)
        self.ledger = Ledger()
        self.timeline = TimelineRecorder()
        self.groups: dict[int, GpuGroup] = {}
        self.node_groups: list[set[int]] = [set() for _ in cluster.nodes]
        self.affinity = [0] * len(cluster.nodes)
        # Seeded server order: ties between equally good servers follow it.
        self.order = [int(i) for i in self.rng.permutation(len(cluster.nodes))]
        self.queue_order = build_queue_order(order) if isinstance(order, str) else order
        self.backfill = backfill  # False: a job that finds no place blocks those behind it
        # None: least loaded first within a tier (Gandiva's own order).
        self.ranker = tier_ranker(placement, workload, self.state, self.rng)
        # Fragmentation is measured against the same job shapes as every other simulator's.
        self.target = gandiva_target(workload.target_sample())
        self.runs: dict[int, JobRun] = {}
        self.queue: list[JobRun] = []
        self.rejected: dict[int, str] = {}
        self.pack = PackCounters()
        self.migrations = 0
        self.defrags = 0
        self.spread_moves = 0
        self.held_gpu_s = 0.0
        self._held_since = 0.0
        self._next_gid = 0
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
        self._settle_all()
        while self.window_s is not None and len(self.snapshots) < 2:
            self._snapshot()  # the run ended before the window did
        return build_result(self, time.perf_counter() - started)

    def _settle_all(self) -> None:
        now = self.engine.now
        for group in self.groups.values():
            group.settle(now)
        self.advance_held(now)

    def _snapshot(self) -> None:
        if len(self.snapshots) < 2:
            self._settle_all()
            self.snapshots.append((self.engine.now, replace(self.ledger), self.held_gpu_s))

    def check(self) -> None:
        """Bookkeeping invariants: state, groups and jobs agree (tests run this always)."""
        self.state.check_invariants()
        placed = 0
        for gid, group in self.groups.items():
            a = self.state.assignments.get(-(gid + 1))
            if a is None or a.node != group.node or a.gpus != group.gpus or not group.units:
                raise BookkeepingError(f"group {gid} disagrees with ClusterState")
            for job in group.jobs():
                placed += 1
                if job.group != gid or job.finished or job.done > job.spec.work * (1 + 1e-9):
                    raise BookkeepingError(f"job {job.spec.id} misplaced in group {gid}")
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
        elif not self.state.fits_when_empty(job):
            verdict = explain(self.state, job)
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
        group = self.groups[gid]
        events = group.fire(self.engine.now)
        for job in events.finished:
            job.group = -1
            self._count_measured(job)
        self.pack.kept += len(events.kept)
        for guest, host in events.undone:
            self.pack.undone += 1
            self.pack.bad_pairs.add((frozenset((guest.spec.id, host.spec.id)), group.gpu.name))
            if not self.config.time_slicing:
                group.remove(guest, self.engine.now)  # no time-slicing: back to the queue
                self._enqueue(guest)
        if not group.units:
            self.close_group(group)
        else:
            self.replan(group)
        if events.finished or events.undone:
            self._schedule_pass()

    def replan(self, group: GpuGroup) -> None:
        if group.handle is not None:
            group.handle.cancel()
            group.handle = None
        when = group.next_event()
        if math.isfinite(when):
            gid = group.gid
            group.handle = self.engine.schedule(when, lambda: self._on_group_event(gid))

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
        spread(self, now)
        if self.config.packing and self.rates.measures_pairs:
            for group in pack_waiting_jobs(self, now):
                self.replan(group)
        self._record(now)

    def _place(self, run: JobRun, now: float) -> bool:
        k = max(1, run.spec.num_gpu)
        views = self.views(k, run.spec)
        share = self.config.max_share
        rank = self.rank(run.spec, k)
        choice = choose_server(views, k, oversubscribe=False, max_share=share, rank=rank)
        if choice is None and self.config.migration and k > 1 and defragment(self, run.spec, k):
            views = self.views(k, run.spec)
            choice = choose_server(views, k, oversubscribe=False, max_share=share, rank=rank)
        if choice is None and self.config.time_slicing:
            choice = choose_server(views, k, oversubscribe=True, max_share=share, rank=rank)
        if choice is None:
            return False
        if choice.kind is ChoiceKind.OVERSUBSCRIBE:
            group = self.groups[choice.group]
            group.add(run, now, resume_cost_s=0.0)
        else:
            group = self.open_group(choice.node, k, now)
            group.add(run, now, resume_cost_s=0.0)
        self.started(run, group)
        self.replan(group)
        return True

    def started(self, run: JobRun, group: GpuGroup) -> None:
        if math.isnan(run.start_s):
            run.start_s = self.engine.now
            run.first_model = group.gpu.name
            run.alone_s = run.spec.work / self.rates.alone(run.spec, group.gpu)

    def usable(self, job: JobSpec) -> np.ndarray:
        """Servers whose GPU model the job allows and runs it on at a positive speed."""
        runs = self.rates.runs_on(job, self.cluster.gpu_models)
        return np.array(runs, dtype=bool)[self.state.node_model]

    def rank(self, job: JobSpec, k: int) -> Rank | None:
        """The order within an affinity tier: None (least loaded) or the named strategy's."""
        return None if self.ranker is None else self.ranker.rank(job, k)

    def views(self, k: int, job: JobSpec) -> list[ServerView]:
        allowed = self.usable(job)
        free = self.free_counts()
        views: list[ServerView] = []
        for node in self.order:
            num = int(self.state.num_gpus[node])
            if not allowed[node] or num < k:
                continue
            gids = self.node_groups[node]
            jobs = sum(self.groups[g].num_jobs for g in gids)
            # Sharing is bounded in resident jobs, so a packed pair counts as two.
            shared = [(self.groups[g].num_jobs, g) for g in gids if self.groups[g].k == k]
            resident, gid = min(shared) if shared else (0, -1)
            views.append(
                ServerView(
                    node, self.affinity[node], num, int(free[node]), jobs / num, gid, resident
                )
            )
        return views

    def free_counts(self) -> np.ndarray:
        return (self.state.gpu_exists & (self.state.gpu_free == MILLI_PER_GPU)).sum(axis=1)

    # --- groups on GPUs -----------------------------------------------------------------

    def open_group(self, node: int, k: int, now: float) -> GpuGroup:
        free = np.flatnonzero(
            self.state.gpu_exists[node] & (self.state.gpu_free[node] == MILLI_PER_GPU)
        )
        if len(free) < k:
            raise BookkeepingError(f"node {node} has {len(free)} free GPUs, needs {k}")
        gid = self._next_gid
        self._next_gid += 1
        gpus = tuple(int(g) for g in free[:k])
        self.advance_held(now)
        self.state.allocate(Assignment(-(gid + 1), node, gpus, MILLI_PER_GPU, 0, 0))
        if not self.node_groups[node]:
            self.affinity[node] = k
        model = self.cluster.nodes[node].gpu
        group = GpuGroup(gid, node, gpus, model, self.rates, self.config, self.ledger, now)
        self.groups[gid] = group
        self.node_groups[node].add(gid)
        return group

    def close_group(self, group: GpuGroup) -> None:
        if group.handle is not None:
            group.handle.cancel()
        self.advance_held(self.engine.now)
        self.state.release(-(group.gid + 1))
        del self.groups[group.gid]
        self.node_groups[group.node].discard(group.gid)
        if not self.node_groups[group.node]:
            self.affinity[group.node] = 0

    def advance_held(self, now: float) -> None:
        held = self.state.allocated_gpu_milli / MILLI_PER_GPU
        self.held_gpu_s += held * (now - self._held_since)
        self._held_since = now

    def _record(self, now: float) -> None:
        running = sum(len(g.units[0].jobs) for g in self.groups.values() if now >= g.paused_until)
        gpu_w, cpu_w = cluster_power_w(self.state)
        allocated = float(self.state.allocated_gpu_milli)
        queued = len(self.queue)
        fragmentation = shared_tracker(self.state, self.target).rate()
        self.timeline.record(now, allocated, running, queued, fragmentation, gpu_w, cpu_w)


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
