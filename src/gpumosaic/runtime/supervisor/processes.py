"""The process supervisor: the one owner of every live scheduler's processes.

It launches the leases a mechanism requests (once the job's previous process is gone, so
a job never runs twice at once), stops them, turns each exit into the job's next state
(``exits.record_exit``: done, back in the queue, a retried or failed attempt,
cancelled), takes over a state file after a restart (``recover``), stops leases whose
process went silent, carries out cancellations, and follows lost and returned nodes
(``nodes.NodeWatcher``). Scheduling stays with the mechanism: it asks through
``requests.Mechanism`` (did the job do all its steps, a job left) and is told of nodes.

Clock and executor are given (``clock``: the service's, ``executor``: Ray, warm Ray or
in-process), so the same logic runs under a fake clock in tests. Not thread-safe: the
mechanism's driver calls it under its own lock.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from gpumosaic.lease import read_checkpoint_steps
from gpumosaic.results.outcome import Outcome
from gpumosaic.runtime.cluster import LiveCluster
from gpumosaic.runtime.executors.contract import Executor, ExitReport, LaunchSpec
from gpumosaic.runtime.executors.launch import launch_spec, stop_previous_process
from gpumosaic.runtime.jobs.ends import CANCELLED_BY_USER
from gpumosaic.runtime.leases import LeaseTable, LiveLease
from gpumosaic.runtime.state.records import JobRow, LeaseRow
from gpumosaic.runtime.state.store import StateUnwritable, Store
from gpumosaic.runtime.supervisor.config import DriverConfig
from gpumosaic.runtime.supervisor.exits import ExitOutcome, record_exit
from gpumosaic.runtime.supervisor.nodes import NodeEvent, NodeWatcher
from gpumosaic.runtime.supervisor.requests import LeaseRequest, Mechanism, SupervisorCounters


class Supervisor:
    def __init__(
        self,
        store: Store,
        table: LeaseTable,
        executor: Executor,
        cluster: LiveCluster,
        config: DriverConfig,
        mechanism: Mechanism,
        clock: Callable[[], float],
        nodes: NodeWatcher | None = None,
    ) -> None:
        self.store = store
        self.table = table
        self.executor = executor
        self.config = config
        self.mechanism = mechanism
        self.clock = clock
        self.nodes = nodes
        self._cluster = cluster
        self.counters = SupervisorCounters()
        self.jobs: dict[int, JobRow] = {}  # what never changes about a job (its submission)
        self.durable: dict[int, float] = {}  # job -> steps that survive (as in the store)
        self.lease_of: dict[int, str] = {}  # job -> its live lease (processes exist)
        self.job_of_lease: dict[str, int] = {}
        self.request_of: dict[str, LeaseRequest] = {}  # live lease -> what launched it
        self.stopping: set[str] = set()
        self.failing: dict[str, str] = {}  # lease -> why it was stopped as a failed attempt
        self.pending: dict[int, LeaseRequest] = {}  # launches waiting for the old process
        self._cancels_seen = -1
        self._silence_checked = -1.0
        # Executor calls made inside a decision's transaction, run after it commits (the
        # API never waits on an executor behind the store's lock); None: call at once.
        self._deferred: list[Callable[[], None]] | None = None
        # Executor calls of decisions the state file lacks (``Store.behind``): made once
        # they are written (``catch_up``).
        self._held: list[Callable[[], None]] = []
        self._log_root = config.log_root.resolve()
        self._ckpt_root = config.checkpoint_root.resolve()

    @property
    def cluster(self) -> LiveCluster:
        """The cluster as its nodes are bound now (a returned node has a new id)."""
        return self.nodes.cluster if self.nodes is not None else self._cluster

    # ---- where things live ---------------------------------------------------------

    def checkpoint_dir(self, job_id: int) -> Path:
        return self._ckpt_root / f"job-{job_id}"

    def log_path(self, job_id: int) -> Path:
        return self._log_root / f"job-{job_id}.log"

    def note_in_log(self, job_id: int, line: str) -> None:
        """A line in the job's log (``gpumosaic logs``), where the log is on this machine."""
        try:
            self._log_root.mkdir(parents=True, exist_ok=True)
            with open(self.log_path(job_id), "a") as log:
                log.write(f"gpumosaic: {line}\n")
        except OSError:
            pass

    # ---- jobs ------------------------------------------------------------------------

    def know(self, job: JobRow) -> None:
        """A job the mechanism admitted: its submission and the steps that survive."""
        self.jobs[job.id] = job
        self.durable[job.id] = job.steps_done

    def steps_now(self, job_id: int) -> float:
        """The job's steps: its live lease's last report, else the store's."""
        lease_id = self.lease_of.get(job_id)
        if lease_id is not None:
            lease = self.table.get(lease_id)
            if lease is not None:
                return lease.steps
        job = self.store.job(job_id)
        return job.steps_done if job is not None else 0.0

    def running(self, job_id: int) -> str | None:
        """The job's live lease that is not being stopped, if any."""
        lease_id = self.lease_of.get(job_id)
        return None if lease_id is None or lease_id in self.stopping else lease_id

    # ---- restart ---------------------------------------------------------------------

    def recover(self, now: float) -> list[LeaseRow]:
        """Take over a state file: end the leases of the previous run (stopping any of
        their processes that survived on this machine) and requeue their jobs at their
        last checkpoint (the store's, or the checkpoint file's if it is newer)."""
        stale = self.store.recover(now)
        for lease in stale:
            self.executor.reap(lease.id, sum(len(gpus) for _, gpus, _ in lease.parts))
            stop_previous_process(lease, self.config.grace_s)
        for job in self.store.jobs(live_only=True):
            on_disk = read_checkpoint_steps(self.checkpoint_dir(job.id))
            if on_disk is not None and on_disk > job.checkpoint_steps:
                self.store.record_checkpoint(job.id, on_disk, now)
                self.store.record_progress(job.id, on_disk)
        return stale

    # ---- launch and stop -------------------------------------------------------------

    def request(self, request: LeaseRequest, now: float) -> None:
        """Launch now, or once the job's previous process is gone."""
        if request.job_id in self.lease_of:
            self.pending[request.job_id] = request
        else:
            self.launch(request, now)

    def drop_pending(self) -> None:
        """Forget the launches not made yet (a new plan replaces them)."""
        self.pending.clear()

    def launch(self, request: LeaseRequest, now: float) -> str:
        """Start the lease's processes; its id."""
        job_id = request.job_id
        job = self.jobs[job_id]
        lease_id = f"{job_id}-{request.tag}-{uuid.uuid4().hex[:8]}"
        spec = self._spec(job, request, lease_id)
        lease = LiveLease(
            lease_id=lease_id,
            job_id=job_id,
            round_idx=request.round_idx,
            gpu_type=request.gpu_type,
            type_index=request.type_index,
            world_size=len(spec.ranks),
            total_steps=job.steps,
            until_step=request.until_step,
            deadline=request.deadline,
            launched_at=now,
            steps_at_launch=self.durable.get(job_id, 0.0),
            measured_grant=request.measured,
        )
        self.table.add(lease)
        parts = [(node, gpus, milli) for node, gpus, milli in request.parts]
        self.store.add_lease(lease_id, job_id, request.round_idx, request.gpu_type, parts, now)
        index = "-".join(str(g) for _, gpus, _ in request.parts for g in gpus)
        self.store.mark_running(job_id, lease_id, request.gpu_type, index, now)
        self.lease_of[job_id] = lease_id
        self.job_of_lease[lease_id] = job_id
        self.request_of[lease_id] = request
        self.mechanism.lease_started(request, lease_id, now)
        self._executor_call(lambda: self.executor.launch(spec))
        self.counters.launches += 1
        return lease_id

    def _spec(self, job: JobRow, request: LeaseRequest, lease_id: str) -> LaunchSpec:
        partner = None if request.partner is None else self.jobs[request.partner]
        spec = launch_spec(
            job,
            request.entry,
            lease_id,
            self.cluster,
            server_url=self.config.server_url,
            token=self.config.token,
            checkpoint_dir=self.checkpoint_dir(job.id),
            log_path=self.log_path(job.id),
            time_scale=self.config.time_scale,
            packed_with=partner,
            job_user=self.config.job_user,
        )
        if request.env:
            spec = replace(spec, env=tuple(sorted({**dict(spec.env), **dict(request.env)}.items())))
        if request.gpu_milli is not None:
            spec = replace(spec, gpu_milli=request.gpu_milli)
        return spec

    def stop(self, lease_id: str, failure: str = "") -> None:
        """Tell the lease's processes to stop (checkpoint and exit; killed after the
        grace period). ``failure``: it is stopped as a failed attempt, for this reason."""
        if failure:
            self.failing[lease_id] = failure
        self.table.stop(lease_id)
        grace_s = self.config.grace_s
        self._executor_call(lambda: self.executor.stop(lease_id, grace_s))
        self.stopping.add(lease_id)
        self.counters.stops += 1

    @contextmanager
    def deferring(self) -> Iterator[None]:
        """Inside: launches and stops are queued; they run, in order (a round's stops
        before its launches), when the block ends, after the caller's transaction has
        committed. So no executor call is made with the store's lock held. When the
        decision could not be written (``Store.behind``), they wait for ``catch_up``:
        no process starts or stops that the state file does not know of."""
        self._deferred = []
        try:
            yield
        finally:
            calls, self._deferred = self._deferred, None
        if self.store.behind is not None or self._held:
            self._held.extend(calls)
            return
        for call in calls:
            call()

    def catch_up(self) -> None:
        """Before anything else a driver does: the decisions the state file lacks are
        written (``StateUnwritable`` while they cannot be: nothing else happens then,
        and processes run on as they are), then their held executor calls are made."""
        if self.store.behind is None and not self._held:
            return
        self.store.check_writable()
        calls, self._held = self._held, []
        for call in calls:
            call()

    def written(self) -> None:
        """``StateUnwritable`` when the last decision could not be written (kept)."""
        behind = self.store.behind
        if behind is not None:
            raise StateUnwritable(behind)

    def _executor_call(self, call: Callable[[], None]) -> None:
        if self._deferred is None:
            call()
        else:
            self._deferred.append(call)

    def stop_all(self) -> None:
        """Stop every lease (the service is going down on purpose)."""
        for lease_id in list(self.lease_of.values()):
            if lease_id not in self.stopping:
                self.stop(lease_id)

    # ---- between decisions -----------------------------------------------------------

    def tick(self, now: float) -> None:
        """Nodes, exits, cancellations, deferred launches and silent leases, as one
        decision (``Store.batch``; the caller makes it deferring and checks ``written``)."""
        with self.store.batch():
            if self.nodes is not None:
                self.follow_nodes(now)
            for report in self.executor.poll():
                self.on_exit(report, now)
            self.cancel_requested(now)
            for job_id in [j for j in self.pending if j not in self.lease_of]:
                self.launch(self.pending.pop(job_id), now)
        if now - self._silence_checked >= self.config.time_scale:  # about once a second
            self._silence_checked = now
            self.stop_silent(now)

    def on_exit(self, report: ExitReport, now: float) -> ExitOutcome | None:
        """A lease's processes are gone: record what it means for its job."""
        job_id = self.job_of_lease.pop(report.lease_id, None)
        if job_id is None:
            return None
        lease = self.table.end(report.lease_id)  # from now on its calls are fenced
        stopped = report.lease_id in self.stopping
        self.stopping.discard(report.lease_id)
        failure = self.failing.pop(report.lease_id, "")
        self.request_of.pop(report.lease_id, None)
        if self.lease_of.get(job_id) == report.lease_id:
            del self.lease_of[job_id]
        self.mechanism.lease_ended(job_id, report.lease_id, lease, now)
        job = self.store.job(job_id)
        assert job is not None
        steps = lease.steps if lease is not None else job.steps_done
        outcome = record_exit(
            self.store,
            job,
            report,
            lease,
            now,
            stopped=stopped,
            all_steps_reported=self.mechanism.all_steps_done(job_id, steps),
            failure=failure,
        )
        if report.lost and not job.cancel_requested:
            self.counters.lost += 1
            self.pending.pop(job_id, None)
        if outcome.retry:
            self.counters.retries += 1
        self.durable[job_id] = outcome.steps_done
        end = outcome.end.outcome
        if end.final:
            self.pending.pop(job_id, None)
            self.mechanism.job_ended(job_id, end, now)
        # "queued": the mechanism runs it again from its checkpoint when it decides to.
        return outcome

    def cancel_requested(self, now: float) -> None:
        """Cancellations since the last look: a running job is stopped (cancelled once
        its process is gone), any other ends now."""
        if self.store.jobs_version == self._cancels_seen:
            return
        self._cancels_seen = self.store.jobs_version
        for job in self.store.jobs(live_only=True):
            if not job.cancel_requested:
                continue
            self.pending.pop(job.id, None)
            lease_id = self.lease_of.get(job.id)
            if lease_id is not None:
                if lease_id not in self.stopping:
                    self.stop(lease_id)
                continue  # cancelled when the process is gone
            self.store.finish(job.id, CANCELLED_BY_USER, now)
            self.mechanism.job_ended(job.id, Outcome.CANCELLED, now)

    def stop_silent(self, now: float) -> None:
        """Stop, as failed attempts, leases whose process never called the lease API in
        time or stopped calling it (see ``DriverConfig.start_grace_s``)."""
        scale = self.config.time_scale
        for job_id, lease_id in list(self.lease_of.items()):
            lease = self.table.get(lease_id)
            if lease is None or lease_id in self.stopping or lease.parked:
                continue
            job = self.jobs.get(job_id)
            if job is not None and not job.preemptible:
                continue  # it never calls the lease API (JobSubmission.preemptible)
            if lease.last_call_at is None:
                silent, grace = (now - lease.launched_at) / scale, self.config.start_grace_s
                why = f"no lease call within {grace:g} s of its start"
            else:
                silent, grace = (now - lease.last_call_at) / scale, self.config.report_grace_s
                why = f"no lease call for {grace:g} s"
            if silent > grace:
                self.note_in_log(job_id, f"lease {lease_id} stopped: {why}")
                self.counters.silent_stops += 1
                self.stop(lease_id, failure=why)

    def follow_nodes(self, now: float) -> None:
        """Lost and returned nodes (docs/live.md, "More than one node"): each change is an
        event and goes to the mechanism; a lost node's launches not made yet are dropped
        and its leases stopped (their jobs go back to the queue at their checkpoints when
        the executor reports them gone)."""
        assert self.nodes is not None
        for change in self.nodes.poll(now):
            self.store.event(now, None, change.event.value, change.describe())
            self.mechanism.nodes_changed(change, now)
            if change.event is not NodeEvent.LOST:
                continue
            lost = set(change.nodes)
            for job_id, request in list(self.pending.items()):
                if not lost.isdisjoint(request.nodes):
                    del self.pending[job_id]
            for job_id, lease_id in list(self.lease_of.items()):
                held = self.request_of.get(lease_id)
                if lease_id in self.stopping or held is None or lost.isdisjoint(held.nodes):
                    continue
                self.note_in_log(job_id, f"lease {lease_id} ends: {change.describe()}")
                self.stop(lease_id)
