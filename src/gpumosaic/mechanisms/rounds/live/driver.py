"""The wall-clock round driver: Gavel's physical mode around the shared ``RoundDecider``.

At each round boundary (``boundary(now)``):

1. close the round that ends: the steps each job reported since the decider last heard
   of it, how long it held its GPUs, when it finished -> ``decider.report``; each job's
   measured steps/s (the job's own stepping time) is folded into its estimate for that
   GPU model (EMA, alpha 0.5 as Gavel) and replaces the prior from the next solve on;
2. admit the jobs submitted since, withdraw cancelled and failed ones;
3. ``decider.plan(now)`` (which solves when due); if nothing can run and no lease is
   alive, force a solve once, as the simulator does;
4. apply the plan: a lease whose entry is ``extended`` goes on (new grant, same process,
   same PID); every other live lease is told to stop (its job checkpoints and exits;
   SIGTERM now, SIGKILL after the grace period); every other entry gets a new lease
   launched on exactly the node and GPUs the plan names, once the job's previous
   process (if any) is gone, so a job never runs twice at once.

Between boundaries ``tick`` lets the process supervisor (``runtime/supervisor``) handle
process exits (done, lease end, failure with bounded retries, a lost actor or node ->
back to the queue at its last checkpoint), cancellations, deferred launches, silent
leases and lost nodes; it asks this driver's decider whether a job did all its steps and
tells it which jobs left. The round ends at ``round_s`` or earlier when every lease of the
plan has parked (used its grant) or exited, as the simulator ends a round when its last
job stops.

A packed pair (an entry with two jobs, the ``_packed`` policies) is two leases on the
same GPUs: each member is launched on the entry's node and device indices with its own
step grant from the plan and is told its partner (``launch.launch_spec``); each one
starts, parks, exits or fails on its own, so one may finish or fail while the other
runs on to its grant. Each member's measured rate is a pair rate: it goes to the
decider's pair rates (``observe_pair_rate``), never to its isolated estimate.

Progress is counted no further than the last checkpoint: when a process ends without
saving its last steps, the job's steps go back to its checkpoint (and the decider is
told so at the next round it runs in).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gpumosaic.mechanisms.rounds.decision import RoundPlan
from gpumosaic.mechanisms.rounds.idle import force_solve_due
from gpumosaic.mechanisms.rounds.live.decider import LiveRoundDecider, PriorThroughputs
from gpumosaic.mechanisms.rounds.live.meter import RoundMeter
from gpumosaic.model.plan import PlannedEntity
from gpumosaic.results.outcome import JobEnd, Outcome
from gpumosaic.runtime.cluster import LiveCluster
from gpumosaic.runtime.executors.contract import Executor
from gpumosaic.runtime.leases import LeaseTable, LiveLease
from gpumosaic.runtime.state.records import LeaseRow
from gpumosaic.runtime.state.store import Store
from gpumosaic.runtime.supervisor.config import DriverConfig
from gpumosaic.runtime.supervisor.nodes import NodeChange, NodeEvent, NodeWatcher
from gpumosaic.runtime.supervisor.processes import Supervisor
from gpumosaic.runtime.supervisor.requests import LeaseRequest, SupervisorCounters

__all__ = ["DriverConfig", "DriverCounters", "RoundDriver"]


@dataclass(slots=True)
class DriverCounters:
    """What the round driver decided (the supervisor counts what it did to processes)."""

    rounds: int = 0
    extensions: int = 0
    forced_solves: int = 0
    unmeasured_grants: int = 0  # leases bounded by time only (rate not yet measured)
    packed_launches: int = 0  # leases launched as a member of a packed pair
    pair_rate_samples: int = 0  # rates measured by members of packed pairs
    boundary_s: list[float] = field(default_factory=list)  # decision time per boundary
    # Per new lease: round start -> the process's first lease call (service clock).
    launch_latency_s: list[float] = field(default_factory=list)


class RoundDriver:
    def __init__(
        self,
        store: Store,
        table: LeaseTable,
        executor: Executor,
        decider: LiveRoundDecider,
        cluster: LiveCluster,
        priors: PriorThroughputs,
        config: DriverConfig,
        clock: Callable[[], float] = time.time,
        on_plan: Callable[[RoundPlan], None] | None = None,
        hold: Callable[[], AbstractContextManager[None]] | None = None,
        nodes: NodeWatcher | None = None,
    ) -> None:
        """``hold``: a context in which ``clock`` runs at wall speed (a time-scaled
        clock's ``held``: the service's own decisions are not scaled). ``nodes``: Ray
        node membership, followed by the supervisor between boundaries."""
        self.store = store
        self.table = table
        self.decider = decider
        self.priors = priors
        self.config = config
        self.clock = clock
        self.on_plan = on_plan
        self._hold = hold if hold is not None else nullcontext
        self.supervisor = Supervisor(
            store, table, executor, cluster, config, self, clock, nodes=nodes
        )
        self.epoch = store.epoch(clock())
        self.row_of: dict[int, int] = {}
        self.total_of: dict[int, float] = {}
        self.plan: RoundPlan | None = None
        self.round_idx = store.last_round()
        self.round_end = 0.0
        self.counters = DriverCounters()
        self._forced_at = math.nan
        self._admitted_seen = -1
        self._lock = threading.Lock()  # boundary and tick never overlap
        self._unwritten: RoundPlan | None = None  # decided, not in the state file yet
        self.type_index = {name: i for i, name in enumerate(decider.type_names)}
        self.meter = RoundMeter(self.type_index)
        self.pinned_jobs: set[int] = set()  # non-preemptible jobs running to their exit

    # ---- what the supervisor owns, read here -----------------------------------------

    @property
    def cluster(self) -> LiveCluster:
        return self.supervisor.cluster

    @property
    def lease_of(self) -> dict[int, str]:
        """job -> its live lease (the supervisor's)."""
        return self.supervisor.lease_of

    @property
    def pending(self) -> dict[int, LeaseRequest]:
        """Launches planned this round, waiting for the job's previous process."""
        return self.supervisor.pending

    @property
    def process_counters(self) -> SupervisorCounters:
        return self.supervisor.counters

    def checkpoint_dir(self, job_id: int) -> Path:
        return self.supervisor.checkpoint_dir(job_id)

    # ---- time ----------------------------------------------------------------------

    def decision_time(self, wall: float) -> float:
        """The decider's clock: seconds since the state file was first used."""
        return wall - self.epoch

    # ---- restart -------------------------------------------------------------------

    def recover(self) -> list[LeaseRow]:
        """Take over a state file (``Supervisor.recover``) and admit every live job again
        with its progress and measured rates."""
        now = self.clock()
        stale = self.supervisor.recover(now)
        self._admit(now)
        return stale

    # ---- the boundary --------------------------------------------------------------

    def boundary(self, now: float) -> RoundPlan:
        """One round boundary in three steps: the round that ends and the jobs that came
        are recorded in one transaction; the policy is asked (it may solve) with no lock
        of the store held, so the API never waits on a solve; the plan is applied and
        recorded in a second transaction. Launches and stops run once both committed, so
        the API never waits on an executor either. A decision the state file could not
        take is kept (``Store.batch``): ``StateUnwritable``, and the next call writes it
        and makes its executor calls before it returns the same plan."""
        if self._unwritten is not None:
            with self._lock:
                self.supervisor.catch_up()  # StateUnwritable while it cannot be written
            plan, self._unwritten = self._unwritten, None
            return plan
        self.store.check_writable()  # before anything changes (StateUnwritable: try later)
        with self._hold(), self._lock:
            self.supervisor.catch_up()
            t0 = time.perf_counter()
            with self.supervisor.deferring():
                with self.store.batch():
                    self.supervisor.tick(now)
                    if self.plan is not None:
                        self._close_round(now)
                    self._admit(now)
                seen = self.store.jobs_version
                plan = self._decide(now)  # the solve: the store's lock is free
                with self.store.batch():
                    if self.on_plan is not None:
                        self.on_plan(plan)
                    # The fence: a job cancelled during the solve is not launched (the
                    # next tick carries its cancellation out).
                    self._apply(
                        plan, now, self._cancelled() if self.store.jobs_version != seen else set()
                    )
            self.counters.boundary_s.append(time.perf_counter() - t0)
        if self.store.behind is not None:
            self._unwritten = plan
            self.supervisor.written()
        return plan

    def _decide(self, now: float) -> RoundPlan:
        t = self.decision_time(now)
        plan = self.decider.plan(t)
        alive = bool(self.supervisor.lease_of)
        if force_solve_due(self.decider, plan, t, waiting=alive, forced_at=self._forced_at):
            self._forced_at = t  # Gavel forces a solve when nothing runs
            self.counters.forced_solves += 1
            self.decider.solve(t)
            plan = self.decider.plan(t)
        return plan

    def _cancelled(self) -> set[int]:
        return {j.id for j in self.store.jobs(live_only=True) if j.cancel_requested}

    def _close_round(self, now: float) -> None:
        plan = self.plan
        assert plan is not None
        closed = self.meter.close(
            plan.entries,
            now,
            self.epoch,
            steps_now=self.supervisor.steps_now,
            live_lease=self._live_lease,
            lease_by_id=self.table.get,
            demand_milli=self._demand,
        )
        self.counters.launch_latency_s.extend(closed.launch_latency_s)
        for sample in closed.rates:
            row = self.row_of[sample.job_id]
            if sample.partner is None:
                self.decider.observe_rate(row, sample.type_index, sample.rate)
            else:  # a pair rate (its member's side), kept apart from the isolated one
                self.counters.pair_rate_samples += 1
                partner_row = self.row_of[sample.partner]
                self.decider.observe_pair_rate(row, partner_row, sample.type_index, sample.rate)
        self.decider.report(plan, closed.report)
        self.store.save_round_measures(
            closed.attained,
            [(r.job_id, r.gpu_type, r.rate, r.samples) for r in closed.rates if r.partner is None],
        )
        self.store.end_round(self.round_idx, now)
        self.plan = None

    def _live_lease(self, job_id: int) -> tuple[bool, LiveLease | None]:
        lease_id = self.supervisor.running(job_id)
        if lease_id is None:
            return False, None
        return True, self.table.get(lease_id)

    def _apply(self, plan: RoundPlan, now: float, cancelled: set[int]) -> None:
        sup = self.supervisor
        self.round_idx += 1
        self.plan = plan if len(plan) else None
        self.round_end = now + self.config.round_s
        self.meter.round_started(now)
        entries = plan.entries
        sup.drop_pending()  # launches of the last round never made
        next_of: dict[int, tuple[PlannedEntity, int]] = {}
        for entry in entries:
            for k, job_id in enumerate(entry.job_ids):
                next_of[job_id] = (entry, k)
        for job_id in list(sup.lease_of):
            nxt = next_of.get(job_id)
            lease_id = sup.running(job_id)
            if job_id in self.pinned_jobs:
                continue  # non-preemptible: runs on to its exit (decider.pin)
            if lease_id is not None and (nxt is None or not nxt[0].extended):
                sup.stop(lease_id)
        for job_id, (entry, k) in next_of.items():
            t = self.type_index[entry.gpu_type]
            partner = entry.job_ids[1 - k] if len(entry.job_ids) == 2 else None
            measured = self.meter.is_measured(job_id, t, partner)
            total = self.total_of[job_id]
            until = min(sup.steps_now(job_id) + entry.steps[k], total) if measured else total
            if not measured:
                self.counters.unmeasured_grants += 1
            current = sup.running(job_id)
            if entry.extended and current is not None:
                self.table.extend(current, until, self.round_end, measured)
                self.store.extend_lease(current)
                self.counters.extensions += 1
                self.meter.lease_started(job_id, current, now, launched=False, partner=partner)
                continue
            if job_id in cancelled:
                continue
            sup.request(self._request(job_id, entry, t, until, measured, partner), now)
        self.store.start_round(
            self.round_idx,
            now,
            [
                [list(e.job_ids), e.gpu_type, e.extended, [list(p.gpus) for p in e.parts]]
                for e in entries
            ],
        )
        self.counters.rounds += 1

    def _request(
        self,
        job_id: int,
        entry: PlannedEntity,
        type_index: int,
        until: float,
        measured: bool,
        partner: int | None,
    ) -> LeaseRequest:
        # A pair's members hold each GPU half each (the pair holds it whole).
        members = len(entry.job_ids)
        return LeaseRequest(
            job_id=job_id,
            entry=entry,
            tag=str(self.round_idx),
            round_idx=self.round_idx,
            type_index=type_index,
            until_step=until,
            deadline=self.round_end,
            measured=measured,
            parts=tuple((p.node, tuple(p.gpus), p.gpu_milli // members) for p in entry.parts),
            partner=partner,
        )

    # ---- between boundaries --------------------------------------------------------

    def tick(self, now: float) -> None:
        with self._lock:
            self.supervisor.catch_up()
            with self.supervisor.deferring():
                self.supervisor.tick(now)
            self.supervisor.written()

    def round_over(self, now: float) -> bool:
        """The round ends once every planned lease has used its grant (parked), reported
        its last step or exited (at the latest ``park_wait_s`` after its end time); an
        idle service starts a round as soon as a job arrives."""
        if now >= self.round_end + self.config.park_wait_s * self.config.time_scale:
            return True
        sup = self.supervisor
        if self.plan is None:
            if now >= self.round_end:
                return True
            return self._unadmitted() or (self.decider.has_active_jobs and not sup.lease_of)
        if sup.pending:
            return False
        for entry in self.plan.entries:
            for job_id in entry.job_ids:
                lease_id = sup.running(job_id)
                if lease_id is None:
                    continue
                lease = self.table.get(lease_id)
                if lease is None or lease.parked or lease.finished_at is not None:
                    continue
                if now >= self.round_end and not lease.contacted:
                    continue  # never started: nothing to wait for
                return False
        return True

    def wait(self, poll_s: float) -> None:
        """Sleep until a lease parks, finishes or ends, the round's end, or ``poll_s``
        (wall seconds), whichever comes first."""
        to_end = (self.round_end - self.clock()) / self.config.time_scale
        timeout = min(poll_s, to_end) if to_end > 0 else poll_s
        if self.table.changed.wait(timeout):
            self.table.changed.clear()

    def _unadmitted(self) -> bool:
        return self.store.jobs_version != self._admitted_seen

    def _admit(self, now: float) -> None:
        if self.store.jobs_version == self._admitted_seen:
            return
        self._admitted_seen = self.store.jobs_version
        for job in self.store.jobs(live_only=True):
            if job.id in self.row_of or job.cancel_requested:
                continue
            spec = job.spec(self.decision_time(job.submitted_at))
            # The prior: the submission's known rates, else Gavel's table for its type,
            # else unknown (NaN: estimated and profiled); a measured rate beats both.
            known = self.store.known_rates(job.id)
            rates = np.array(
                [known.get(m.name, self.priors.rate(spec, m)) for m in self.decider.models]
            )
            measured = self.meter.admit(job.id, self.store.throughput_samples(job.id))
            for t, rate in measured.items():
                rates[t] = rate
            for i, m in enumerate(self.decider.models):
                if not spec.allows(m.name):
                    rates[i] = 0.0
            row = self.decider.admit(spec, rates)
            self.row_of[job.id] = row
            self.total_of[job.id] = job.steps
            if row in self.decider.jobs.rejected:
                self.store.finish(job.id, JobEnd.rejected(self.decider.jobs.rejected[row]), now)
                continue
            self.supervisor.know(job)
            if job.steps_done > 0:
                self.decider.restore_progress(row, job.steps_done)
            self.meter.start_progress(job.id, job.steps_done)

    # ---- what the supervisor asks (``runtime.supervisor.requests.Mechanism``) ----------

    def all_steps_done(self, job_id: int, steps: float) -> bool:
        row = self.row_of.get(job_id)
        return row is not None and self.decider.all_steps_done(row)

    def lease_started(self, request: LeaseRequest, lease_id: str, now: float) -> None:
        self.meter.lease_started(request.job_id, lease_id, now, partner=request.partner)
        if request.partner is not None:
            self.counters.packed_launches += 1
        job = self.supervisor.jobs.get(request.job_id)
        row = self.row_of.get(request.job_id)
        pinned = job is not None and not job.preemptible and row is not None
        if pinned and row is not None and self.decider.pin(row):
            self.pinned_jobs.add(request.job_id)

    def lease_ended(self, job_id: int, lease_id: str, lease: LiveLease | None, now: float) -> None:
        self.meter.lease_ended(job_id, lease_id, lease, now)
        if job_id in self.pinned_jobs:  # its GPUs are free, it is planned again if queued
            self.pinned_jobs.discard(job_id)
            row = self.row_of.get(job_id)
            if row is not None:
                self.decider.unpin(row)

    def job_ended(self, job_id: int, outcome: Outcome, now: float) -> None:
        row = self.row_of.get(job_id)
        if row is None:
            return
        in_round = self.plan is not None and any(job_id in e.job_ids for e in self.plan.entries)
        job = self.supervisor.jobs.get(job_id)
        in_round = in_round and (job is None or job.preemptible)  # a round counts no step
        self.decider.process_ended(row, self.decision_time(now), outcome=outcome, in_round=in_round)

    def nodes_changed(self, change: NodeChange, now: float) -> None:
        """A lost node's GPUs leave the decider's cluster, a returned one's come back
        (the supervisor stops the leases on a lost node). Either ends the round now, so
        the next plan is made for the cluster as it is."""
        nodes = set(change.nodes)
        if change.event is NodeEvent.RETURNED:
            self.decider.put_back(nodes)
        elif change.event is NodeEvent.LOST:
            self.decider.take_out(nodes)
        if change.event is not NodeEvent.UNUSED:
            self.round_end = min(self.round_end, now)

    # ---- reading -------------------------------------------------------------------

    def packed_with_of(self, job_id: int) -> int | None:
        """The job that shares the job's GPUs now (a packed pair), if any."""
        lease_id = self.supervisor.lease_of.get(job_id)
        request = None if lease_id is None else self.supervisor.request_of.get(lease_id)
        return None if request is None else request.partner

    def _demand(self, job_id: int) -> int:
        row = self.row_of[job_id]
        return int(self.decider.jobs.demand_milli[row])

    def shutdown(self) -> None:
        """Stop every lease (the service is going down on purpose)."""
        with self._lock:
            self.supervisor.stop_all()
