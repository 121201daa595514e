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

Between boundaries ``tick`` handles process exits (done, lease end, failure with bounded
retries, a lost actor or node -> back to the queue at its last checkpoint), cancellations
and deferred launches. The round ends at ``round_s`` or earlier when every lease of the
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

import threading
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gpumosaic.lease import read_checkpoint_steps
from gpumosaic.live.rounds.cluster import LiveCluster
from gpumosaic.live.rounds.decider import LiveRoundDecider, PriorThroughputs
from gpumosaic.live.rounds.executor import Executor, ExitReport, LaunchSpec
from gpumosaic.live.rounds.exits import record_exit
from gpumosaic.live.rounds.launch import launch_spec, stop_previous_process
from gpumosaic.live.rounds.leases import LeaseTable, LiveLease
from gpumosaic.live.rounds.meter import RoundMeter
from gpumosaic.live.rounds.nodes import NodeEvent, NodeWatcher
from gpumosaic.live.rounds.records import JobRow, LeaseRow
from gpumosaic.live.rounds.store import StateUnwritable, Store
from gpumosaic.mechanisms.rounds.decision import PlannedEntity, RoundPlan


@dataclass(frozen=True, slots=True)
class DriverConfig:
    round_s: float = 360.0
    grace_s: float = 10.0  # SIGTERM -> SIGKILL
    max_retries: int = 2  # a failing job runs at most 1 + max_retries times
    poll_s: float = 0.05
    # At the round's end, wait up to this long (wall seconds) for the plan's running
    # leases to park: their grants end at the round's end, and their last report carries
    # the round's last steps (without it they would be credited to the next round).
    park_wait_s: float = 1.0
    # A lease's process is a failed attempt (stopped, then retried or failed) when it
    # makes no lease call within ``start_grace_s`` of its launch, or none for
    # ``report_grace_s`` while it runs (jobs report at least once a second; a parked
    # lease waiting for its round decision is not silent). Wall seconds.
    start_grace_s: float = 300.0
    report_grace_s: float = 120.0
    server_url: str = "http://127.0.0.1:8470"
    token: str = ""
    data_dir: str = "."  # logs/ and checkpoints/ live under it
    time_scale: float = 1.0  # job seconds per wall second (live/rounds/timescale.py)
    job_user: str = ""  # --job-user: the OS user the jobs run as ('' for Ray's own)

    @property
    def checkpoint_root(self) -> Path:
        return Path(self.data_dir) / "checkpoints"

    @property
    def log_root(self) -> Path:
        return Path(self.data_dir) / "logs"


@dataclass(slots=True)
class DriverCounters:
    rounds: int = 0
    launches: int = 0
    extensions: int = 0
    stops: int = 0
    lost: int = 0
    retries: int = 0
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
        node membership, followed between boundaries (``_follow_nodes``)."""
        self.store = store
        self.table = table
        self.executor = executor
        self.decider = decider
        self.cluster = cluster
        self.priors = priors
        self.config = config
        self.clock = clock
        self.on_plan = on_plan
        self.nodes = nodes
        self._hold = hold if hold is not None else nullcontext
        self.epoch = store.epoch(clock())
        self.row_of: dict[int, int] = {}
        self.total_of: dict[int, float] = {}
        self.lease_of: dict[int, str] = {}  # job -> its live lease (processes exist)
        self.job_of_lease: dict[str, int] = {}
        self.stopping: set[str] = set()
        self.failing: dict[str, str] = {}  # lease -> why it was stopped as a failed attempt
        self._silence_checked = -1.0
        self.pending: dict[int, LaunchSpec] = {}  # launches waiting for the old process
        # job -> the job it shares its GPUs with now (a packed pair's live leases)
        self.packed_with: dict[int, int] = {}
        self.plan: RoundPlan | None = None
        self.round_idx = store.last_round()
        self.round_end = 0.0
        self.counters = DriverCounters()
        self._forced_at = -1.0
        self._cancels_seen = -1
        self._admitted_seen = -1
        self.durable: dict[int, float] = {}  # job -> steps that survive (as in the store)
        self._static: dict[int, JobRow] = {}  # what never changes about a job (its submission)
        self._log_root = config.log_root.resolve()
        self._ckpt_root = config.checkpoint_root.resolve()
        # Leases built for this round, until launched: (lease, parts, partner or None).
        self._lease_specs: dict[
            str, tuple[LiveLease, list[tuple[int, tuple[int, ...], int]], int | None]
        ] = {}
        self._lock = threading.Lock()  # boundary and tick never overlap
        self._unrecorded: list[ExitReport] = []  # exits polled while the state was unwritable
        # Executor calls of the boundary in progress, made once its transaction commits.
        self._deferred: list[Callable[[], None]] | None = None
        self.type_index = {name: i for i, name in enumerate(decider.type_names)}
        self.meter = RoundMeter(self.type_index)

    # ---- time ----------------------------------------------------------------------

    def decision_time(self, wall: float) -> float:
        """The decider's clock: seconds since the state file was first used."""
        return wall - self.epoch

    # ---- restart -------------------------------------------------------------------

    def recover(self) -> list[LeaseRow]:
        """Take over a state file: end the leases of the previous run (stopping any of
        their processes that survived on this machine), requeue their jobs at their last
        checkpoint (the store's, or the checkpoint file's if it is newer) and admit every
        live job again with its progress and measured rates."""
        now = self.clock()
        stale = self.store.recover(now)
        for lease in stale:
            self.executor.reap(lease.id, sum(len(gpus) for _, gpus, _ in lease.parts))
            stop_previous_process(lease, self.config.grace_s)
        for job in self.store.jobs(live_only=True):
            on_disk = read_checkpoint_steps(self.checkpoint_dir(job.id))
            if on_disk is not None and on_disk > job.checkpoint_steps:
                self.store.record_checkpoint(job.id, on_disk, now)
                self.store.record_progress(job.id, on_disk)
        self._admit(now)
        return stale

    # ---- the boundary --------------------------------------------------------------

    def boundary(self, now: float) -> RoundPlan:
        self.store.check_writable()  # before anything changes (StateUnwritable: try later)
        with self._hold(), self._lock:
            # Decide and record in one transaction (the store's lock held), then launch
            # and stop outside it: the API never waits on an executor call.
            self._deferred = []
            try:
                with self.store.batch():
                    plan = self._decide(now)
            finally:
                calls, self._deferred = self._deferred or [], None
            for call in calls:
                call()
            return plan

    def _decide(self, now: float) -> RoundPlan:
        t0 = time.perf_counter()
        self._tick(now)
        if self.plan is not None:
            self._close_round(now)
        self._admit(now)
        plan = self.decider.plan(self.decision_time(now))
        idle = not len(plan) and self.decider.has_active_jobs and not self.lease_of
        if idle and self._forced_at != now:  # Gavel forces a solve when nothing runs
            self._forced_at = now
            self.counters.forced_solves += 1
            self.decider.solve(self.decision_time(now))
            plan = self.decider.plan(self.decision_time(now))
        if self.on_plan is not None:
            self.on_plan(plan)
        self._apply(plan, now)
        self.counters.boundary_s.append(time.perf_counter() - t0)
        return plan

    def _close_round(self, now: float) -> None:
        plan = self.plan
        assert plan is not None
        closed = self.meter.close(
            plan.entries,
            now,
            self.epoch,
            steps_now=self._steps_now,
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
        lease_id = self.lease_of.get(job_id)
        if lease_id is None or lease_id in self.stopping:
            return False, None
        return True, self.table.get(lease_id)

    def _apply(self, plan: RoundPlan, now: float) -> None:
        self.round_idx += 1
        self.plan = plan if len(plan) else None
        self.round_end = now + self.config.round_s
        self.meter.round_started(now)
        entries = plan.entries
        for spec in self.pending.values():  # launches of the last round never made
            self._lease_specs.pop(spec.lease_id, None)
        self.pending.clear()
        next_of: dict[int, tuple[PlannedEntity, int]] = {}
        for entry in entries:
            for k, job_id in enumerate(entry.job_ids):
                next_of[job_id] = (entry, k)
        for job_id, lease_id in list(self.lease_of.items()):
            nxt = next_of.get(job_id)
            if lease_id not in self.stopping and (nxt is None or not nxt[0].extended):
                self._stop(job_id, lease_id)
        for job_id, (entry, k) in next_of.items():
            t = self.type_index[entry.gpu_type]
            partner = entry.job_ids[1 - k] if len(entry.job_ids) == 2 else None
            measured = self.meter.is_measured(job_id, t, partner)
            steps_now = self._steps_now(job_id)
            total = self.total_of[job_id]
            until = min(steps_now + entry.steps[k], total) if measured else total
            if not measured:
                self.counters.unmeasured_grants += 1
            current = self.lease_of.get(job_id)
            if entry.extended and current is not None and current not in self.stopping:
                self.table.extend(current, until, self.round_end, measured)
                self.store.extend_lease(current)
                self.counters.extensions += 1
                self.meter.lease_started(job_id, current, now, launched=False, partner=partner)
                continue
            spec = self._launch_spec(job_id, entry, until, measured, now, partner)
            if current is not None:  # the previous process is still stopping
                self.pending[job_id] = spec
            else:
                self._launch(spec, now)
        self.store.start_round(
            self.round_idx,
            now,
            [
                [list(e.job_ids), e.gpu_type, e.extended, [list(p.gpus) for p in e.parts]]
                for e in entries
            ],
        )
        self.counters.rounds += 1

    # ---- between boundaries --------------------------------------------------------

    def tick(self, now: float) -> None:
        with self._lock:
            self._tick(now)

    def _tick(self, now: float) -> None:
        if self.nodes is not None:
            self._follow_nodes(now)
        reports = self._unrecorded + self.executor.poll()
        self._unrecorded = []
        if reports:
            try:  # checked before anything changes: the reports wait for a writable state
                self.store.check_writable()
            except StateUnwritable:
                self._unrecorded = reports
                raise
            with self.store.batch():
                for report in reports:
                    self._on_exit(report, now)
        if self.store.jobs_version != self._cancels_seen:
            self._cancels_seen = self.store.jobs_version
            for job in self.store.jobs(live_only=True):
                if job.cancel_requested:
                    self._cancel(job, now)
        for job_id in [j for j in self.pending if j not in self.lease_of]:
            self._launch(self.pending.pop(job_id), now)
        if now - self._silence_checked >= self.config.time_scale:  # about once a second
            self._silence_checked = now
            self._stop_silent(now)

    def _follow_nodes(self, now: float) -> None:
        """Hook of ``nodes.NodeWatcher`` (docs/live.md, "More than one node"): a lost Ray
        node's GPUs leave the decider's cluster and the leases planned on it end (their
        jobs go back to the queue at their checkpoints when the executor reports them
        gone); a returned one's GPUs come back. Either ends the round now, so the next
        plan is made for the cluster as it is. Each change is an event."""
        assert self.nodes is not None
        changes = self.nodes.poll(now)
        self.cluster = self.nodes.cluster
        for change in changes:
            self.store.event(now, None, change.event.value, change.describe())
            nodes = set(change.nodes)
            if change.event is NodeEvent.RETURNED:
                self.decider.put_back(nodes)
            elif change.event is NodeEvent.LOST:
                self.decider.take_out(nodes)
                for entry in self.plan.entries if self.plan is not None else ():
                    if nodes.isdisjoint(p.node for p in entry.parts):
                        continue
                    for job_id in entry.job_ids:
                        spec = self.pending.pop(job_id, None)
                        if spec is not None:
                            self._lease_specs.pop(spec.lease_id, None)
                        lease_id = self.lease_of.get(job_id)
                        if lease_id is not None and lease_id not in self.stopping:
                            self._note_in_log(job_id, f"lease {lease_id} ends: {change.describe()}")
                            self._stop(job_id, lease_id)
            if change.event is not NodeEvent.UNUSED:
                self.round_end = min(self.round_end, now)

    def _stop_silent(self, now: float) -> None:
        """Stop, as failed attempts, leases whose process never called the lease API in
        time or stopped calling it (see ``DriverConfig.start_grace_s``)."""
        scale = self.config.time_scale
        for job_id, lease_id in list(self.lease_of.items()):
            lease = self.table.get(lease_id)
            if lease is None or lease_id in self.stopping or lease.parked:
                continue
            if lease.last_call_at is None:
                silent, grace = (now - lease.launched_at) / scale, self.config.start_grace_s
                why = f"no lease call within {grace:g} s of its start"
            else:
                silent, grace = (now - lease.last_call_at) / scale, self.config.report_grace_s
                why = f"no lease call for {grace:g} s"
            if silent > grace:
                self.failing[lease_id] = why
                self._note_in_log(job_id, f"lease {lease_id} stopped: {why}")
                self._stop(job_id, lease_id)

    def _note_in_log(self, job_id: int, line: str) -> None:
        """A line in the job's log (``gpumosaic logs``), where the log is on this machine."""
        try:
            self._log_root.mkdir(parents=True, exist_ok=True)
            with open(self._log_root / f"job-{job_id}.log", "a") as log:
                log.write(f"gpumosaic: {line}\n")
        except OSError:
            pass

    def round_over(self, now: float) -> bool:
        """The round ends once every planned lease has used its grant (parked), reported
        its last step or exited (at the latest ``park_wait_s`` after its end time); an
        idle service starts a round as soon as a job arrives."""
        if now >= self.round_end + self.config.park_wait_s * self.config.time_scale:
            return True
        if self.plan is None:
            if now >= self.round_end:
                return True
            return self._unadmitted() or (self.decider.has_active_jobs and not self.lease_of)
        if self.pending:
            return False
        for entry in self.plan.entries:
            for job_id in entry.job_ids:
                lease_id = self.lease_of.get(job_id)
                if lease_id is None or lease_id in self.stopping:
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

    # ---- jobs in and out -----------------------------------------------------------

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
            self._static[job.id] = job
            self.total_of[job.id] = job.steps
            if row in self.decider.jobs.rejected:
                self.store.finish(job.id, "rejected", str(self.decider.jobs.rejected[row]), now)
                continue
            self.durable[job.id] = job.steps_done
            if job.steps_done > 0:
                self.decider.restore_progress(row, job.steps_done)
            self.meter.start_progress(job.id, job.steps_done)

    def _cancel(self, job: JobRow, now: float) -> None:
        self.pending.pop(job.id, None)
        lease_id = self.lease_of.get(job.id)
        if lease_id is not None:
            if lease_id not in self.stopping:
                self._stop(job.id, lease_id)
            return  # cancelled when the process is gone
        self.store.finish(job.id, "cancelled", "cancelled by the user", now)
        self._withdraw(job.id, now)

    def _withdraw(self, job_id: int, now: float) -> None:
        row = self.row_of.get(job_id)
        if row is not None:
            self.decider.withdraw(row, self.decision_time(now))

    # ---- leases --------------------------------------------------------------------

    def checkpoint_dir(self, job_id: int) -> Path:
        return self._ckpt_root / f"job-{job_id}"

    def _launch_spec(
        self,
        job_id: int,
        entry: PlannedEntity,
        until: float,
        measured: bool,
        now: float,
        partner: int | None = None,
    ) -> LaunchSpec:
        job = self._static[job_id]
        lease_id = f"{job_id}-{self.round_idx}-{uuid.uuid4().hex[:8]}"
        spec = launch_spec(
            job,
            entry,
            lease_id,
            self.cluster,
            server_url=self.config.server_url,
            token=self.config.token,
            checkpoint_dir=self.checkpoint_dir(job_id),
            log_path=self._log_root / f"job-{job_id}.log",
            time_scale=self.config.time_scale,
            packed_with=None if partner is None else self._static[partner],
            job_user=self.config.job_user,
        )
        lease = LiveLease(
            lease_id=lease_id,
            job_id=job_id,
            round_idx=self.round_idx,
            gpu_type=entry.gpu_type,
            type_index=self.type_index[entry.gpu_type],
            world_size=len(spec.ranks),
            total_steps=job.steps,
            until_step=until,
            deadline=self.round_end,
            launched_at=now,
            steps_at_launch=0.0,
            measured_grant=measured,
        )
        self._lease_specs[lease_id] = (
            lease,
            # A pair's members hold each GPU half each (the pair holds it whole).
            [(p.node, tuple(p.gpus), p.gpu_milli // len(entry.job_ids)) for p in entry.parts],
            partner,
        )
        return spec

    def _launch(self, spec: LaunchSpec, now: float) -> None:
        lease, parts, partner = self._lease_specs.pop(spec.lease_id)
        lease.steps_at_launch = self.durable.get(spec.job_id, 0.0)
        lease.launched_at = now
        self.table.add(lease)
        self.store.add_lease(
            spec.lease_id, spec.job_id, lease.round_idx, lease.gpu_type, parts, now
        )
        index = "-".join(str(g) for _, gpus, _ in parts for g in gpus)
        self.store.mark_running(spec.job_id, spec.lease_id, lease.gpu_type, index, now)
        self.lease_of[spec.job_id] = spec.lease_id
        self.job_of_lease[spec.lease_id] = spec.job_id
        self.meter.lease_started(spec.job_id, spec.lease_id, now, partner=partner)
        if partner is not None:
            self.packed_with[spec.job_id] = partner
            self.counters.packed_launches += 1
        self._executor_call(lambda: self.executor.launch(spec))
        self.counters.launches += 1

    def _stop(self, job_id: int, lease_id: str) -> None:
        self.table.stop(lease_id)
        grace_s = self.config.grace_s
        self._executor_call(lambda: self.executor.stop(lease_id, grace_s))
        self.stopping.add(lease_id)
        self.counters.stops += 1

    def _executor_call(self, call: Callable[[], None]) -> None:
        """Run ``call`` now, or, inside a boundary's transaction, after it commits (in
        order: the round's stops before its launches)."""
        if self._deferred is None:
            call()
        else:
            self._deferred.append(call)

    def _on_exit(self, report: ExitReport, now: float) -> None:
        job_id = self.job_of_lease.pop(report.lease_id, None)
        if job_id is None:
            return
        lease = self.table.end(report.lease_id)  # from now on its calls are fenced
        stopped = report.lease_id in self.stopping
        self.stopping.discard(report.lease_id)
        failure = self.failing.pop(report.lease_id, "")
        if self.lease_of.get(job_id) == report.lease_id:
            del self.lease_of[job_id]
            self.packed_with.pop(job_id, None)
        self.meter.lease_ended(job_id, report.lease_id, lease, now)
        job = self.store.job(job_id)
        assert job is not None
        row = self.row_of.get(job_id)
        outcome = record_exit(
            self.store,
            job,
            report,
            lease,
            now,
            stopped=stopped,
            all_steps_reported=row is not None and not self.decider.jobs.is_active[row],
            failure=failure,
        )
        if report.lost and not job.cancel_requested:
            self.counters.lost += 1
            self.pending.pop(job_id, None)
        if outcome.retry:
            self.counters.retries += 1
        self.durable[job_id] = outcome.steps_done
        if outcome.state in ("done", "failed", "cancelled"):
            self.pending.pop(job_id, None)
            planned = self.plan is not None and any(job_id in e.job_ids for e in self.plan.entries)
            if outcome.state != "done" or not planned:  # a planned one is credited at round end
                self._withdraw(job_id, now)

    # ---- helpers -------------------------------------------------------------------

    def _steps_now(self, job_id: int) -> float:
        lease_id = self.lease_of.get(job_id)
        if lease_id is not None:
            lease = self.table.get(lease_id)
            if lease is not None:
                return lease.steps
        job = self.store.job(job_id)
        return job.steps_done if job is not None else 0.0

    def packed_with_of(self, job_id: int) -> int | None:
        """The job that shares the job's GPUs now (a packed pair), if any."""
        return self.packed_with.get(job_id)

    def _demand(self, job_id: int) -> int:
        row = self.row_of[job_id]
        return int(self.decider.jobs.demand_milli[row])

    def shutdown(self) -> None:
        """Stop every lease (the service is going down on purpose)."""
        with self._lock:
            for job_id, lease_id in list(self.lease_of.items()):
                if lease_id not in self.stopping:
                    self._stop(job_id, lease_id)
