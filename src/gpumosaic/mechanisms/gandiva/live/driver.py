"""The wall-clock Gandiva driver: the simulator's ``GandivaDecider``, driven by the wall
clock, the jobs' lease reports and their exits, its processes run by the live runtime's
process supervisor (``runtime/supervisor``: launch, stop, exits, retries, cancellations,
restarts, silent leases) through the service's executor (in-process or Ray).

What the decider is told, and when (``tick``, every ``poll_s``):

- ``admit(job, now)`` for every job submitted since (a ``Reject`` ends it in the store);
- ``observe(job, steps/s)`` from each running lease's reports: steps over the job's own
  stepping seconds, measured afresh whenever the job's partner on its GPU changes (the
  rate book files rates by partner, alone = -1);
- ``wake(set, now)`` once the wall clock passes ``next_due(set)`` (armed for every set in
  a step's ``retimed``): quantum ends and trial verdicts;
- ``withdraw(job, now)`` when a job left for good (its process exited having done its
  steps as the decider judges them, ``all_steps_done``; or it failed or was cancelled).

What it measures, as the round driver does: each job's attained GPU time (the seconds its
processes spent stepping, times its GPUs) and its steps/s on its GPU model, in the store
(``gpumosaic jobs``), and its suspensions, migrations and packed partner.

How its actions run: the driver reconciles the processes with the decider's sets after
every step. A job of a set's running unit must have a live lease on that set's node and
GPUs; any other live lease is told to stop (``Suspend``, ``Unpack`` and the source side of
``Migrate``: the job checkpoints at its boundary and exits, SIGTERM and SIGKILL after the
grace period back it up, as a preempted round job). A launch (``Start``, ``Resume``,
``Pack`` with ``running``, the target side of ``Migrate``) waits until the job's previous
process is gone and no stopping process still holds one of its GPUs, so a job never runs
twice at once and a time-sliced GPU never runs the outgoing and the incoming unit
together. A relaunched job starts from its last checkpoint (the lease protocol's base).

A lease here grants every remaining step and a time horizon that the driver renews
before it runs out; it ends only when the decider moves the job or the job exits. The
actions' ``at_s`` (the decider's modelled hand-over and migration costs) are not waited
for: the real costs are the processes' own stop and start times.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path

from gpumosaic.mechanisms.gandiva import (
    GandivaDecider,
    Migrate,
    Pack,
    Reject,
    Resume,
    Start,
    StartGang,
    Step,
    Suspend,
    Unpack,
)
from gpumosaic.mechanisms.gandiva.live.emulate import ENV_PARTNER_FILE
from gpumosaic.mechanisms.gandiva.live.records import (
    GandivaLiveCounters,
    HandOverTimes,
    ShownCounts,
    Where,
)
from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.plan import PlannedEntity
from gpumosaic.model.state import Assignment
from gpumosaic.results.outcome import JobEnd, Outcome
from gpumosaic.runtime.cluster import LiveCluster
from gpumosaic.runtime.executors.contract import Executor
from gpumosaic.runtime.leases import LeaseTable, LiveLease
from gpumosaic.runtime.state.records import GandivaJobRow, LeaseRow
from gpumosaic.runtime.state.store import Store
from gpumosaic.runtime.supervisor.config import DriverConfig
from gpumosaic.runtime.supervisor.nodes import NodeChange, NodeEvent, NodeWatcher
from gpumosaic.runtime.supervisor.processes import Supervisor
from gpumosaic.runtime.supervisor.requests import LeaseRequest

__all__ = ["GandivaDriver", "GandivaLiveCounters", "HandOverTimes", "Where"]

# A lease's time horizon in wall seconds (times the time scale in the service's job-time
# clock), renewed when half of it is left: long enough that a job never parks waiting for
# a renewal, short enough that a job whose service died stops on its own. (In job time it
# was 0.6 s of wall time at a scale of 1,000: jobs reached its end between renewals, saved
# a checkpoint at each and, once parked, were never renewed.)
LEASE_HORIZON_S = 600.0
# What each rank of a one-GPU job reserves from the executor: half a GPU, so that a packed
# pair fits on one GPU in its accounting. Whether two jobs share a GPU is the decider's
# decision: the driver launches a second job onto a GPU only when packed.
PACKABLE_SHARE_MILLI = MILLI_PER_GPU // 2
# A job's steps/s is written to the store when it moved by more than this fraction.
RATE_WRITE_CHANGE = 0.01


@dataclass(slots=True)
class _Window:
    """A lease's rate window: since the job's partner on its GPU last changed."""

    partner: int
    steps: float
    iter_s: float


class GandivaDriver:
    def __init__(
        self,
        store: Store,
        table: LeaseTable,
        executor: Executor,
        decider: GandivaDecider,
        cluster: LiveCluster,
        config: DriverConfig,
        clock: Callable[[], float] = time.time,
        on_step: Callable[[float, Step], None] | None = None,
        nodes: NodeWatcher | None = None,
    ) -> None:
        """``nodes``: the service's node membership (the supervisor follows it and
        tells ``nodes_changed``), as the round driver's."""
        self.store = store
        self.table = table
        self.decider = decider
        self.config = config
        self.clock = clock
        self.on_step = on_step
        self.supervisor = Supervisor(store, table, executor, cluster, config, self, clock, nodes)
        self.epoch = store.epoch(clock())
        self.counters = GandivaLiveCounters()
        self.times = HandOverTimes()
        self.shown = ShownCounts(store)
        # job -> (which list of ``times``, when decided) until its new process calls
        self._awaited: dict[int, tuple[list[float], float]] = {}
        self._partner_written: dict[int, str] = {}
        self.due: dict[int, float] = {}  # set -> its next wake (decision time)
        self._windows: dict[str, _Window] = {}
        self._rate_written: dict[int, tuple[str, float, int]] = {}  # job -> model, rate, n
        self.attained_s = 0.0  # GPU seconds credited to every job so far (this run)
        self._launch_seq = len(store.leases())  # lease numbers go on across restarts
        self._admitted_seen = -1
        self._lock = threading.Lock()
        self._model_index = {m.name: i for i, m in enumerate(cluster.spec.gpu_models)}

    # ---- what the supervisor owns, read here -----------------------------------------

    @property
    def cluster(self) -> LiveCluster:
        return self.supervisor.cluster

    @property
    def lease_of(self) -> dict[int, str]:
        """job -> its lease whose processes exist (the supervisor's)."""
        return self.supervisor.lease_of

    def where_of(self, lease_id: str) -> Where:
        request = self.supervisor.request_of[lease_id]
        first, *more = request.entry.parts
        return Where(first.node, tuple(first.gpus), tuple((p.node, tuple(p.gpus)) for p in more))

    def checkpoint_dir(self, job_id: int) -> Path:
        return self.supervisor.checkpoint_dir(job_id)

    # ---- time ----------------------------------------------------------------------

    def decision_time(self, wall: float) -> float:
        return wall - self.epoch

    # ---- restart -------------------------------------------------------------------

    def recover(self) -> list[LeaseRow]:
        """Take over a state file (``Supervisor.recover``), unpack every job (the decider
        starts afresh) and admit the live jobs again."""
        now = self.clock()
        stale = self.supervisor.recover(now)
        for job in self.store.jobs(live_only=True):
            row = self.store.gandiva_job(job.id)
            if row is not None and row.packed_with is not None:
                self.store.save_gandiva_job(
                    GandivaJobRow(row.job_id, row.suspensions, row.migrations, None)
                )
        with self._lock, self.store.batch():
            self._admit(now)
            self._reconcile(now)
        return stale

    # ---- the loop ------------------------------------------------------------------

    def boundary(self, now: float) -> None:
        """The service loop's first call: the same as a tick (Gandiva has no rounds)."""
        self.tick(now)

    def round_over(self, now: float) -> bool:
        """Never: the service loop only ticks (each tick admits, wakes and reconciles)."""
        return False

    def wait(self, poll_s: float) -> None:
        """Sleep until a lease parks, finishes or ends, or ``poll_s`` (wall seconds)."""
        if self.table.changed.wait(poll_s):
            self.table.changed.clear()

    def tick(self, now: float) -> None:
        """One decision (``Store.batch``); its executor calls once it is written."""
        with self._lock:
            self.supervisor.catch_up()  # StateUnwritable while the file lacks one
            with self.supervisor.deferring(), self.store.batch():
                self.supervisor.tick(now)
                self._admit(now)
                self._observe(now)
                self._wake_due(now)
                self._reconcile(now)
            self.supervisor.written()

    # ---- decider in ----------------------------------------------------------------

    def _admit(self, now: float) -> None:
        if self.store.jobs_version == self._admitted_seen:
            return
        self._admitted_seen = self.store.jobs_version
        for job in self.store.jobs(live_only=True):
            if job.id in self.supervisor.jobs or job.cancel_requested:
                continue
            self.supervisor.know(job)
            self.shown.admit(job.id)
            t = self.decision_time(now)
            self._apply(self.decider.admit(job.spec(self.decision_time(job.submitted_at)), t), now)

    def _wake_due(self, now: float) -> None:
        t = self.decision_time(now)
        # Bounded: a wake re-arms its set strictly later (next_due > t) or drops it.
        for _ in range(4 * len(self.due) + 4):
            ready = [(due, gid) for gid, due in self.due.items() if due <= t]
            if not ready:
                return
            _, gid = min(ready)
            del self.due[gid]
            self.counters.wakes += 1
            self._apply(self.decider.wake(gid, t), now)

    def _observe(self, now: float) -> None:
        """Each running lease's rate since its partner last changed -> ``observe``."""
        for job_id, lease_id in self.lease_of.items():
            if lease_id in self.supervisor.stopping:
                continue
            lease = self.table.get(lease_id)
            if lease is None or not lease.contacted:
                continue
            awaited = self._awaited.get(job_id)
            if awaited is not None and lease.contacted_at is not None:
                kind, since = awaited
                if lease.launched_at >= since:  # launched for that decision, not before it
                    kind.append(lease.contacted_at - since)
                    del self._awaited[job_id]
            partner = self._partner(job_id)
            window = self._windows.get(lease_id)
            if window is None or window.partner != partner:
                self._windows[lease_id] = _Window(partner, lease.steps, lease.iter_s)
                continue
            ran_s = lease.iter_s - window.iter_s
            if ran_s > 0 and lease.steps > window.steps:
                rate = (lease.steps - window.steps) / ran_s
                self.decider.observe(job_id, rate)
                self.counters.observations += 1
                self._write_rate(job_id, lease.gpu_type, rate)

    def _write_rate(self, job_id: int, gpu_type: str, rate: float) -> None:
        """The job's steps/s on its model for ``gpumosaic jobs``, where it moved."""
        model, written, n = self._rate_written.get(job_id, ("", 0.0, 0))
        n = n + 1 if model == gpu_type else 1
        self._rate_written[job_id] = (gpu_type, written if model == gpu_type else 0.0, n)
        if model == gpu_type and abs(rate - written) <= RATE_WRITE_CHANGE * written:
            return
        self._rate_written[job_id] = (gpu_type, rate, n)
        self.store.save_round_measures([], [(job_id, gpu_type, rate, n)])

    def _partner(self, job_id: int) -> int:
        """The job it shares its GPU with in its set's running unit (-1: alone or none)."""
        gjob = self.decider.jobs.get(job_id)
        group = None if gjob is None else self.decider.group(gjob.group)
        if group is None or gjob is None or not group.units:
            return -1
        running = group.units[0].jobs
        if gjob not in running:
            return -1
        return next((j.id for j in running if j is not gjob), -1)

    # ---- decider out ---------------------------------------------------------------

    def _apply(self, step: Step, now: float) -> None:
        t = self.decision_time(now)
        if self.on_step is not None:
            self.on_step(t, step)
        c = self.counters
        for action in step.actions:
            match action:
                case Reject(job_id=job_id, reason=reason):
                    c.rejected += 1
                    self.store.finish(job_id, JobEnd.rejected(reason), now)
                case Start(job_id=job_id, running=True) | StartGang(job_id=job_id):
                    self._awaited[job_id] = (self.times.start, now)
                case Suspend(job_id=job_id):
                    c.suspensions += 1
                    self._awaited.pop(job_id, None)
                    self.store.event(now, job_id, "suspended", "gandiva time slice")
                case Resume(job_id=job_id):
                    c.resumes += 1
                    self._awaited[job_id] = (self.times.switch, now)
                case Pack(guest_id=guest, host_id=host, running=running):
                    c.packs += 1
                    if running:
                        self._awaited[guest] = (self.times.pack, now)
                    self.store.event(now, guest, "packed", f"with job {host} on trial")
                case Unpack(guest_id=guest, host_id=host, gain=gain):
                    c.unpacks += 1
                    c.suspensions += 1
                    self._awaited.pop(guest, None)
                    self.store.event(now, guest, "unpacked", f"from job {host}: gain {gain:.2f}")
                case Migrate(job_id=job_id, to_node=to_node, reason=why) as move:
                    c.migrations += 1
                    kind = self.times.switch if move.same_node else self.times.migration
                    self._awaited[job_id] = (kind, now)
                    self.store.event(now, job_id, "migrated", f"to node {to_node} ({why})")
        for gid in step.retimed:
            due = self.decider.next_due(gid)
            if due == float("inf"):
                self.due.pop(gid, None)
            else:
                self.due[gid] = max(due, t)
        self.shown.save(self.decider, step)

    # ---- processes -----------------------------------------------------------------

    def wanted(self) -> dict[int, Where]:
        """Every job of a set's running unit, where it must run now."""
        out: dict[int, Where] = {}
        for group in self.decider.sets:
            for gjob in group.running_jobs():
                out[gjob.id] = Where(group.node, group.gpus, group.more)
        return out

    def _reconcile(self, now: float) -> None:
        sup = self.supervisor
        wanted = self.wanted()
        for job_id, lease_id in list(sup.lease_of.items()):
            if lease_id not in sup.stopping and wanted.get(job_id) != self.where_of(lease_id):
                sup.stop(lease_id)
        busy = {(node, g) for lease_id in sup.stopping
                for node, gpus in self.where_of(lease_id).parts for g in gpus}  # fmt: skip
        for job_id, where in wanted.items():
            if job_id in sup.lease_of or job_id not in sup.jobs:
                continue  # running there already, or its previous process is stopping
            if any((node, g) in busy for node, gpus in where.parts for g in gpus):
                continue  # the outgoing unit has not let go of the GPUs yet
            self._launch(job_id, where, now)
        self._write_partners()
        horizon = self.horizon_s
        for lease_id in sup.lease_of.values():  # renew the horizon before it runs out
            lease = self.table.get(lease_id)
            if lease is None or lease_id in sup.stopping or lease.steps >= lease.until_step:
                continue
            # A parked lease (its job reached the horizon first) is renewed too: it waits
            # for exactly this.
            if lease.parked or lease.deadline - now < horizon / 2:
                self.table.extend(lease_id, lease.until_step, now + horizon, True)
                self.counters.renewals += 1

    @property
    def horizon_s(self) -> float:
        """A lease's horizon in the service's clock (job time under a time scale)."""
        return LEASE_HORIZON_S * self.config.time_scale

    def partner_file(self, job_id: int) -> Path:
        """The job type of the job whose process shares this job's GPU now (empty when
        alone), for the job to read (``mechanisms/gandiva/live/emulate.py`` steps at its
        pair rate)."""
        return self.checkpoint_dir(job_id) / "gandiva-partner"

    def _write_partners(self) -> None:
        """Write each running process's partner where it changed. The partner is the other
        live process on its GPU (not the decider's plan: a guest waiting for its launch
        does not slow its host yet)."""
        sup = self.supervisor
        on_gpu: dict[tuple[int, int], list[int]] = {}
        running = [(j, self.where_of(lease)) for j, lease in sup.lease_of.items()
                   if lease not in sup.stopping]  # fmt: skip
        for job_id, where in running:
            if where.shareable:
                on_gpu.setdefault((where.node, where.gpus[0]), []).append(job_id)
        for job_id, where in running:
            others = on_gpu.get((where.node, where.gpus[0]), []) if where.shareable else []
            partner = next((sup.jobs[o].job_type for o in others if o != job_id), "")
            if self._partner_written.get(job_id) != partner:
                self._write_partner(job_id, partner)

    def _write_partner(self, job_id: int, partner: str) -> None:
        path = self.partner_file(job_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(partner + "\n")
        tmp.replace(path)  # whole: the job never reads half a name
        self._partner_written[job_id] = partner

    def _launch(self, job_id: int, where: Where, now: float) -> None:
        job = self.supervisor.jobs[job_id]
        gpu_type = self.cluster.spec.nodes[where.node].gpu.name
        # A one-GPU job may be packed at any time without a relaunch, so it is launched as
        # the half-GPU share the executor reserves for it: under ``--sharing``
        # (SharedExecutor) that puts it under the share runtime, beside whichever partner
        # comes.
        # (A gang, a job across servers, runs on every part's GPUs whole.)
        milli = PACKABLE_SHARE_MILLI if where.shareable else MILLI_PER_GPU
        parts = tuple(Assignment(job_id, node, gpus, milli, 0, 0) for node, gpus in where.parts)
        entry = PlannedEntity((job_id,), gpu_type, parts, False, (job.steps,), (0.0,))
        self._launch_seq += 1
        self._write_partner(job_id, "")  # written again after the launches if it has one
        request = LeaseRequest(
            job_id=job_id,
            entry=entry,
            tag=f"g{self._launch_seq}",
            round_idx=self._launch_seq,
            type_index=self._model_index[gpu_type],
            until_step=job.steps,
            deadline=now + self.horizon_s,
            measured=True,
            parts=tuple((node, gpus, milli) for node, gpus in where.parts),
            env=((ENV_PARTNER_FILE, str(self.partner_file(job_id))),),
            gpu_milli=milli,
        )
        self.supervisor.launch(request, now)

    # ---- what the supervisor asks (``runtime.supervisor.requests.Mechanism``) ----------

    def all_steps_done(self, job_id: int, steps: float) -> bool:
        return self.decider.all_steps_done(job_id, steps)

    def lease_started(self, request: LeaseRequest, lease_id: str, now: float) -> None:
        pass

    def lease_ended(self, job_id: int, lease_id: str, lease: LiveLease | None, now: float) -> None:
        """Credit the lease's stepping time (times the job's GPUs) as attained."""
        self._windows.pop(lease_id, None)
        if lease is None or lease.iter_s <= 0:
            return
        job = self.supervisor.jobs[job_id]
        gpu_s = lease.iter_s * job.num_gpu * job.gpu_milli / MILLI_PER_GPU
        self.attained_s += gpu_s
        self.store.save_round_measures([(gpu_s, job_id)], [])

    def job_ended(self, job_id: int, outcome: Outcome, now: float) -> None:
        step = self.decider.withdraw(job_id, self.decision_time(now))
        if step is not None:
            self._apply(step, now)
        # A job back in the queue ("queued") stays in its set; the next reconcile relaunches
        # it there from its checkpoint if its unit holds the GPUs (a lost or retried process).

    def nodes_changed(self, change: NodeChange, now: float) -> None:
        """As the round driver: a lost node's servers leave the decider (their jobs go
        back to its queue and are placed again, resuming from their checkpoints; the
        supervisor stops their leases), a returned one's are placed on again."""
        nodes = set(change.nodes)
        t = self.decision_time(now)
        if change.event is NodeEvent.LOST:
            self._apply(self.decider.take_out(nodes, t), now)
        elif change.event is NodeEvent.RETURNED:
            self._apply(self.decider.put_back(nodes, t), now)

    # ---- reading -------------------------------------------------------------------

    def held_gpu_s(self, job_id: int) -> float:
        """GPU seconds the job's live lease has stepped so far (credited at its end)."""
        lease_id = self.lease_of.get(job_id)
        lease = None if lease_id is None else self.table.get(lease_id)
        job = self.supervisor.jobs.get(job_id)
        if lease is None or job is None:
            return 0.0
        return lease.iter_s * job.num_gpu * job.gpu_milli / MILLI_PER_GPU

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {
            f"gandiva_{f.name}_total": getattr(self.counters, f.name) for f in fields(self.counters)
        }
        sup = self.supervisor.counters
        for name in ("launches", "stops", "lost", "retries"):
            out[f"gandiva_{name}_total"] = getattr(sup, name)
        out["gandiva_attained_gpu_seconds_total"] = self.attained_s
        out["gandiva_packed_jobs"] = self.shown.packed_now()
        decided = self.decider.counters
        for f in fields(decided):
            out[f"gandiva_decided_{f.name}_total"] = getattr(decided, f.name)
        out["fallbacks_total"] = sum(n for _, n in self.decider.fallbacks.counts)
        for kind, n in self.decider.fallbacks.counts:
            out[f"fallback_{kind.value}_total"] = n
        return out

    def shutdown(self) -> None:
        """Stop every lease (the service is going down on purpose)."""
        with self._lock:
            self.supervisor.stop_all()
