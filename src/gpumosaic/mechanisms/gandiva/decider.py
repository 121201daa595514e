"""Gandiva's scheduler as a decision without a clock: ``GandivaDecider``.

The decider owns everything Gandiva decides with: the admitted jobs, the queue (in the
queue order), the GPU sets with their time-slicing units and pair trials (``GpuSets``,
``GpuGroup``), the servers' affinities, the pairs undone before and the measured rates
(``RateBook``). It never reads a clock: every call carries ``now``, and every call
returns a ``Step``: the typed actions decided (start, start a gang across servers,
suspend, resume, pack, unpack, migrate, reject) in order, and the GPU sets whose next
due time moved. A driver (the simulator in ``mechanisms/gandiva/sim``, or a live
service) calls it so::

    step = decider.admit(job, now)                   # a job arrived
    decider.observe(job_id, steps_per_s)             # a running job's measured rate
    step = decider.wake(gid, now, finished=(...))    # a set's due time came, or jobs of
                                                     # its running unit finished
    step = decider.take_out(nodes, now)              # servers left (live: a lost node);
    step = decider.put_back(nodes, now)              # ... and came back
    ...execute step.actions; for gid in step.retimed: re-arm a timer at
       decider.next_due(gid) (and, knowing the progress, at each running job's finish)

The simulator feeds modelled rates and foresees finishes from its progress model; a live
driver feeds the step rates of its lease reports and reports the jobs that exited.
``Meter`` (``group``) is how a set tells its driver how long its running unit held the
GPUs, for a driver that integrates progress (the simulator); a live one may ignore it.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from gpumosaic.fallbacks import Fallbacks
from gpumosaic.mechanisms.admission import ever_fits
from gpumosaic.mechanisms.gandiva.actions import Action, Reject, Start, StartGang
from gpumosaic.mechanisms.gandiva.affinity import ChoiceKind, Rank, choose_server
from gpumosaic.mechanisms.gandiva.config import GandivaConfig
from gpumosaic.mechanisms.gandiva.counters import GandivaCounters
from gpumosaic.mechanisms.gandiva.group import GandivaJob, GpuGroup, Meter
from gpumosaic.mechanisms.gandiva.moves import defragment, spread
from gpumosaic.mechanisms.gandiva.observations import RateBook
from gpumosaic.mechanisms.gandiva.packing import BadPair, pack_waiting_jobs
from gpumosaic.mechanisms.gandiva.ranking import TierRanker
from gpumosaic.mechanisms.gandiva.rates import RateModel
from gpumosaic.mechanisms.gandiva.sets import GpuSets
from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.base import PlacementStrategy
from gpumosaic.placement.gang import could_span, gang_parts
from gpumosaic.placement.registry import build_placement
from gpumosaic.policies.ordering import QueueOrder, SortKey
from gpumosaic.results.outcome import Rejection, RejectReason
from gpumosaic.workloads.throughputs import Throughputs


class _NoMeter:
    """For a driver that measures progress itself: the sets' time goes nowhere."""

    def ran(self, group: GpuGroup, paused_s: float, ran_s: float) -> None:
        pass

    def running(self, group: GpuGroup) -> None:
        pass


@dataclass(frozen=True, slots=True)
class Step:
    """What one call decided: ``actions`` to execute, in order; ``retimed``: the GPU
    sets whose next due time (or running unit) changed, each once, in the order of their
    last change (a driver re-arms their timers in this order); ``scheduled``: a
    scheduling pass ran (the queue and the sets may have changed anywhere)."""

    actions: tuple[Action, ...]
    retimed: tuple[int, ...]
    scheduled: bool


class GandivaDecider:
    def __init__(
        self,
        cluster: ClusterSpec,
        throughputs: Throughputs,
        config: GandivaConfig,
        rng: np.random.Generator,
        *,
        order: QueueOrder,
        placement: PlacementStrategy | None = None,
        backfill: bool = True,
        meter: Meter | None = None,
    ) -> None:
        """``rng``: the run's Generator (the seeded server order that breaks ties, and
        ``random`` placement's draws); ``placement``: a strategy that orders the servers
        within an affinity tier (None: least loaded first, Gandiva's own);
        ``backfill=False`` stops each pass at the first queued job that finds no place."""
        self.cluster = cluster
        self.config = config
        self.rates = RateModel(throughputs)
        self.rate_book = RateBook(self.rates)
        self._actions: list[Action] = []
        server_order = [int(i) for i in rng.permutation(len(cluster.nodes))]
        self.sets = GpuSets(
            cluster, config, meter or _NoMeter(), self.rate_book, self._actions, server_order
        )
        self.queue_order = order
        self.backfill = backfill
        self.ranker = None if placement is None else TierRanker(placement, self.sets.state, rng)
        # A job that fits only across servers is placed GPU by GPU by this strategy (the
        # event and round mechanisms' ``placement/gang.py``): the named one, else first
        # fit (the fewest servers in the seeded order's stead: the lowest-index GPUs).
        self._gang_placement = placement
        self._rng = rng
        self.spanning: set[int] = set()  # admitted jobs that fit only across servers
        self.away: set[int] = set()  # servers that left (``take_out``), until they return
        self._here = np.ones(len(cluster.nodes), dtype=bool)
        self.jobs: dict[int, GandivaJob] = {}
        self.queue: list[GandivaJob] = []
        self.rejected: dict[int, Rejection] = {}
        self.counters = GandivaCounters()
        self.bad_pairs: set[BadPair] = set()  # undone pairs, never tried again on that model

    # --- reading ----------------------------------------------------------------------

    @property
    def state(self) -> ClusterState:
        """Which GPUs the sets hold (read it; the decider writes it)."""
        return self.sets.state

    @property
    def fallbacks(self) -> Fallbacks:
        return self.rate_book.fallbacks

    def group(self, gid: int) -> GpuGroup | None:
        return self.sets.get(gid)

    def next_due(self, gid: int) -> float:
        """When set ``gid`` needs a ``wake`` for a quantum end or a trial verdict
        (inf: never, unless a job of it finishes)."""
        group = self.sets.get(gid)
        return float("inf") if group is None else group.next_due()

    def running_jobs(self, now: float) -> int:
        return self.sets.running_jobs(now)

    # --- inputs -----------------------------------------------------------------------

    def admit(self, job: JobSpec, now: float) -> Step:
        """A job arrived: reject it with a reason, or queue it and run a pass."""
        gjob = GandivaJob(job)
        self.jobs[job.id] = gjob
        reason = self._refusal(job)
        if reason is not None:
            self.rejected[job.id] = reason
            self._actions.append(Reject(job.id, reason))
            return self._step(scheduled=False)
        self._enqueue(gjob)
        self._pass(now)
        return self._step(scheduled=True)

    def observe(self, job_id: int, steps_per_s: float) -> None:
        """A measured rate of a job that holds GPUs now (alone or in its pair); a report
        for a job that does not (it was suspended since) is dropped."""
        job = self.jobs.get(job_id)
        group = None if job is None else self.sets.get(job.group)
        if job is None or group is None or job not in group.units[0].jobs:
            return
        partner = next((j.id for j in group.units[0].jobs if j is not job), -1)
        self.rate_book.observe(job_id, group.gpu.name, partner, steps_per_s)

    def wake(self, gid: int, now: float, finished: Sequence[int] = ()) -> Step:
        """Set ``gid`` at ``now``: ``finished`` jobs of its running unit are done; with
        none, a due trial verdict or quantum end is decided."""
        group = self.sets.get(gid)
        if group is None:
            return self._step(scheduled=False)
        for job_id in finished:
            group.finish(self.jobs[job_id], now)
            self.rate_book.forget(job_id)
        undone: list[tuple[GandivaJob, GandivaJob]] = []
        verdicts = None if finished else group.wake(now)
        if verdicts is not None:
            undone = verdicts.undone
            for guest, host in undone:
                self.bad_pairs.add((frozenset((guest.id, host.id)), group.gpu.name))
                if not self.config.time_slicing:
                    group.remove(guest, now)  # no time-slicing: back to the queue
                    self._enqueue(guest)
            if verdicts.kept or undone:
                self.counters += GandivaCounters(
                    packs_kept=len(verdicts.kept), packs_undone=len(undone)
                )
        if not group.units:
            self.sets.close(group, now)
        else:
            self.sets.replan(group)
        if finished or undone:
            self._pass(now)
            return self._step(scheduled=True)
        return self._step(scheduled=False)

    def job_finished(self, job_id: int, now: float) -> Step:
        """``wake`` for one job that exited (a live driver's report)."""
        return self.wake(self.jobs[job_id].group, now, (job_id,))

    def withdraw(self, job_id: int, now: float) -> Step | None:
        """The job left for good (done, failed or cancelled): a job of a GPU set leaves it
        as a finished one does (its set's step); a queued one leaves the queue (None:
        nothing else to do)."""
        job = self.jobs.get(job_id)
        if job is None or job.finished:
            return None
        if job.group >= 0:
            return self.job_finished(job_id, now)
        if job in self.queue:  # nothing else refers to a queued job
            self.queue.remove(job)
            job.finished = True
        return None

    def take_out(self, nodes: set[int], now: float) -> Step:
        """Servers left (live: their Ray node is lost). Every job of a set on them goes
        back to the queue (it resumes from its checkpoint wherever it is placed next: a
        running one is suspended), their GPUs are held until they return, and a pass
        places what it can on the servers left."""
        nodes = nodes - self.away
        if not nodes:
            return self._step(scheduled=False)
        for group in {g.gid: g for n in sorted(nodes) for g in self.sets.on_node(n)}.values():
            # The waiting units first: the running one leaves last, with no hand-over.
            for job in reversed(list(group.jobs())):
                group.remove(job, now)
                self._enqueue(job)
            self.sets.close(group, now)
        for node in sorted(nodes):
            self.sets.hold_away(node)
        self.away |= nodes
        self._here[sorted(nodes)] = False
        self._pass(now)
        return self._step(scheduled=True)

    def put_back(self, nodes: set[int], now: float) -> Step:
        """Servers that left came back: their GPUs are placed on again (a pass)."""
        nodes = nodes & self.away
        if not nodes:
            return self._step(scheduled=False)
        for node in sorted(nodes):
            self.sets.release_away(node)
        self.away -= nodes
        self._here[sorted(nodes)] = True
        self._pass(now)
        return self._step(scheduled=True)

    def all_steps_done(self, job_id: int, steps: float) -> bool:
        """``steps`` (the job's last reported count) reach its work: it is done even if
        its last process did not end cleanly."""
        job = self.jobs.get(job_id)
        return job is not None and steps >= job.spec.work

    # --- the scheduling pass ------------------------------------------------------------

    def _refusal(self, job: JobSpec) -> Rejection | None:
        if job.num_gpu == 0:
            return Rejection(RejectReason.CPU_ONLY, "gandiva schedules GPU jobs only")
        # The one admission rule (mechanisms/admission.py), as the event and round
        # mechanisms ask it: a job that may span servers and fits only across them runs
        # as a gang (``_place_gang``).
        refusal = ever_fits(self.state, job, spans=True)
        if refusal is not None:
            return refusal
        if (unmeasured := self.rates.unmeasured(job, self.cluster.gpu_models)) is not None:
            detail = f"{job.job_type} has no speed on {unmeasured}"
            return Rejection(RejectReason.NO_THROUGHPUT, detail)
        usable = self._runs_on(job)  # a server away now may come back
        if not usable.any():
            detail = f"{job.job_type} runs at speed 0 on its GPU models"
            return Rejection(RejectReason.NO_THROUGHPUT, detail)
        if not self.state.fits_when_empty(job):
            if not could_span(self.state, job, usable):
                detail = f"{job.job_type} has a speed on too few GPUs for {job.num_gpu}"
                return Rejection(RejectReason.NO_THROUGHPUT, detail)
            self.spanning.add(job.id)
        return None

    def _enqueue(self, job: GandivaJob) -> None:
        # The queue stays sorted by the queue order's key, then id, as the event simulator's.
        bisect.insort(self.queue, job, key=self._queue_key)

    def _queue_key(self, job: GandivaJob) -> tuple[SortKey, int]:
        return (self.queue_order.key(job.spec), job.id)

    def _pass(self, now: float) -> None:
        """Place queued jobs, spread waiting ones onto free GPUs, then pack."""
        # A job shape that found no place will not find one for a later job in this pass.
        no_place: set[tuple[int, frozenset[str] | None]] = set()
        placed: list[GandivaJob] = []
        for job in self.queue:
            shape = (max(1, job.spec.num_gpu), job.spec.allowed_models)
            if shape in no_place:
                continue
            if self._place(job, now):
                placed.append(job)
            elif not self.backfill:
                break
            else:
                no_place.add(shape)
        if placed:
            done = {id(j) for j in placed}
            self.queue = [j for j in self.queue if id(j) not in done]
        self.counters += spread(self.sets, now, self.config, self._free_elsewhere)
        if self.config.packing and self.rates.measures_pairs:
            self._pack(now)

    def _place(self, job: GandivaJob, now: float) -> bool:
        if job.id in self.spanning:
            return self._place_gang(job, now)
        k = max(1, job.spec.num_gpu)
        allowed = self.usable(job.spec)
        views = self.sets.views(k, allowed)
        share = self.config.max_share
        rank = self.rank(job.spec, k)
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
        running = group.add(job, now, resume_cost_s=self.config.start_s)
        self._actions.append(Start(job.id, group.node, group.gpus, running))
        self.sets.replan(group)
        return True

    def _place_gang(self, job: GandivaJob, now: float) -> bool:
        """A job that fits only across servers: fully free GPUs of one usable model on
        several servers, chosen GPU by GPU by the placement (``placement/gang.py``), all
        of them or none; it holds them alone until it ends."""
        spec, state = job.spec, self.state
        whole = (state.gpu_exists & (state.gpu_free == MILLI_PER_GPU)).sum(axis=1)
        whole = np.where(self.usable(spec), whole, 0)
        free_by_model = np.bincount(
            state.node_model, weights=whole, minlength=len(state.model_names)
        )
        for t, name in enumerate(state.model_names):
            if free_by_model[t] < spec.num_gpu:
                continue
            # Whole GPUs of one usable model, and no CPU or memory (the sets hold GPUs).
            typed = replace(
                spec,
                allowed_models=frozenset({name.upper()}),
                gpu_milli=MILLI_PER_GPU,
                cpu_milli=0,
                memory_mib=0,
            )
            parts = gang_parts(state, self._gang_strategy(), typed, self._rng)
            if parts is None:
                continue
            group = self.sets.open_gang(tuple((a.node, a.gpus) for a in parts), now)
            group.add(job, now, resume_cost_s=self.config.start_s)
            self._actions.append(StartGang(job.id, group.parts))
            self.sets.replan(group)
            return True
        return False

    def _gang_strategy(self) -> PlacementStrategy:
        if self._gang_placement is None:
            self._gang_placement = build_placement("firstfit", None)
        return self._gang_placement

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
        self.counters += GandivaCounters(packs_tried=len(outcome.packed))
        for group in outcome.changed:
            self.sets.replan(group)

    def usable(self, job: JobSpec) -> npt.NDArray[np.bool_]:
        """Servers here whose GPU model the job allows and runs it on at a positive
        speed."""
        runs = self._runs_on(job)
        return runs & self._here if self.away else runs

    def _runs_on(self, job: JobSpec) -> npt.NDArray[np.bool_]:
        runs = self.rates.runs_on(job, self.cluster.gpu_models)
        return np.array(runs, dtype=bool)[self.state.node_model]

    def rank(self, job: JobSpec, k: int) -> Rank | None:
        """The order within an affinity tier: None (least loaded) or the named strategy's."""
        return None if self.ranker is None else self.ranker.rank(job, k)

    def _step(self, *, scheduled: bool) -> Step:
        actions = tuple(self._actions)
        self._actions.clear()
        return Step(actions, self.sets.take_retimed(), scheduled)
