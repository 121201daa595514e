"""The wall-clock Gandiva driver: the simulator's ``GandivaDecider``, driven by the wall
clock, the jobs' lease reports and their exits, executed through the round service's
executor (in-process or Ray), store and lease table.

What the decider is told, and when (``tick``, every ``poll_s``):

- ``admit(job, now)`` for every job submitted since (a ``Reject`` ends it in the store);
- ``observe(job, steps/s)`` from each running lease's reports: steps over the job's own
  stepping seconds, measured afresh whenever the job's partner on its GPU changes (the
  rate book files rates by partner, alone = -1);
- ``wake(set, now)`` once the wall clock passes ``next_due(set)`` (armed for every set in
  a step's ``retimed``): quantum ends and trial verdicts;
- ``job_finished(job, now)`` when a job's process exits having done its steps (and the
  same call withdraws a job that failed or was cancelled: it leaves its GPU set).

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
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from gpumosaic.lease import read_checkpoint_steps
from gpumosaic.live.gandiva.emulate import ENV_PARTNER_FILE
from gpumosaic.live.rounds.cluster import LiveCluster
from gpumosaic.live.rounds.driver import DriverConfig
from gpumosaic.live.rounds.executor import Executor, ExitReport
from gpumosaic.live.rounds.exits import record_exit
from gpumosaic.live.rounds.launch import launch_spec, stop_previous_process
from gpumosaic.live.rounds.leases import LeaseTable, LiveLease
from gpumosaic.live.rounds.records import GandivaJobRow, JobRow, LeaseRow
from gpumosaic.live.rounds.store import Store
from gpumosaic.mechanisms.gandiva import (
    GandivaDecider,
    Migrate,
    Pack,
    Reject,
    Resume,
    Start,
    Step,
    Suspend,
    Unpack,
)
from gpumosaic.mechanisms.rounds.decision import PlannedEntity
from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.state import Assignment

# A lease's time horizon in wall seconds (times the time scale in the service's job-time
# clock), renewed when half of it is left: long enough that a job never parks waiting for
# a renewal, short enough that a job whose service died stops on its own. (In job time it
# was 0.6 s of wall time at a scale of 1,000: jobs reached its end between renewals, saved
# a checkpoint at each and, once parked, were never renewed.)
LEASE_HORIZON_S = 600.0
# What each rank of a one-GPU job reserves from Ray: half a GPU, so that a packed pair
# fits on one GPU in Ray's accounting. Whether two jobs share a GPU is the decider's
# decision, not Ray's: the driver launches a second job onto a GPU only when packed.
PACKABLE_SHARE_MILLI = MILLI_PER_GPU // 2


@dataclass(frozen=True, slots=True)
class Where:
    """A node and its GPUs (ClusterState indices), as a set holds them."""

    node: int
    gpus: tuple[int, ...]


@dataclass(slots=True)
class GandivaLiveCounters:
    """What the live driver did (``/metrics``); the decider's own counts are separate."""

    launches: int = 0
    stops: int = 0
    suspensions: int = 0  # Suspend and Unpack actions executed
    resumes: int = 0
    migrations: int = 0
    packs: int = 0
    unpacks: int = 0
    rejected: int = 0
    lost: int = 0
    retries: int = 0
    wakes: int = 0
    observations: int = 0
    renewals: int = 0


@dataclass(slots=True)
class HandOverTimes:
    """What the decider's actions really cost live, in job time (the service's clock):
    from the decision to the first lease call of the job's new process. ``start``: a
    first start onto free GPUs; ``switch``: a resume at a quantum's end or after a finish
    (the outgoing job's checkpoint and exit, then the launch), or a move within a server;
    ``migration``: a move to another server (checkpoint, exit, relaunch there); ``pack``:
    a guest launched beside its running host. The simulator models them as
    ``GandivaConfig.start_s``, ``switch_s`` and ``migration_cost_s``."""

    start: list[float] = field(default_factory=list)
    switch: list[float] = field(default_factory=list)
    migration: list[float] = field(default_factory=list)
    pack: list[float] = field(default_factory=list)


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
    ) -> None:
        self.store = store
        self.table = table
        self.executor = executor
        self.decider = decider
        self.cluster = cluster
        self.config = config
        self.clock = clock
        self.on_step = on_step
        self.epoch = store.epoch(clock())
        self.counters = GandivaLiveCounters()
        self.times = HandOverTimes()
        # job -> (which list of ``times``, when decided) until its new process calls
        self._awaited: dict[int, tuple[list[float], float]] = {}
        self._partner_written: dict[int, str] = {}
        self.lease_of: dict[int, str] = {}  # job -> its lease whose processes exist
        self.job_of_lease: dict[str, int] = {}
        self.where_of_lease: dict[str, Where] = {}
        self.stopping: set[str] = set()
        self.due: dict[int, float] = {}  # set -> its next wake (decision time)
        self.total_of: dict[int, float] = {}
        self.durable: dict[int, float] = {}  # job -> steps that survive (its checkpoint)
        self._static: dict[int, JobRow] = {}
        self._base: dict[int, GandivaJobRow] = {}  # counts of earlier runs of the service
        self._shown: dict[int, GandivaJobRow] = {}  # what the store has now
        self._packed_shown: set[int] = set()  # jobs the store shows packed
        self._windows: dict[str, _Window] = {}
        self._launch_seq = len(store.leases())  # lease numbers go on across restarts
        self._admitted_seen = -1
        self._cancels_seen = -1
        self._lock = threading.Lock()
        self._ckpt_root = config.checkpoint_root.resolve()
        self._log_root = config.log_root.resolve()
        self._model_index = {m.name: i for i, m in enumerate(cluster.spec.gpu_models)}

    # ---- time ----------------------------------------------------------------------

    def decision_time(self, wall: float) -> float:
        return wall - self.epoch

    # ---- restart -------------------------------------------------------------------

    def recover(self) -> list[LeaseRow]:
        """Take over a state file: end the previous run's leases (stopping survivors on
        this machine), requeue their jobs at their last checkpoint, unpack every job (the
        decider starts afresh) and admit the live jobs again."""
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
        with self._lock, self.store.batch():
            for report in self.executor.poll():
                self._on_exit(report, now)
            if self.store.jobs_version != self._cancels_seen:
                self._cancels_seen = self.store.jobs_version
                for job in self.store.jobs(live_only=True):
                    if job.cancel_requested:
                        self._cancel(job, now)
            self._admit(now)
            self._observe(now)
            self._wake_due(now)
            self._reconcile(now)

    # ---- decider in ----------------------------------------------------------------

    def _admit(self, now: float) -> None:
        if self.store.jobs_version == self._admitted_seen:
            return
        self._admitted_seen = self.store.jobs_version
        for job in self.store.jobs(live_only=True):
            if job.id in self._static or job.cancel_requested:
                continue
            self._static[job.id] = job
            self.total_of[job.id] = job.steps
            self.durable[job.id] = job.steps_done
            self._base[job.id] = self.store.gandiva_job(job.id) or GandivaJobRow(job.id)
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
            if lease_id in self.stopping:
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
                self.decider.observe(job_id, (lease.steps - window.steps) / ran_s)
                self.counters.observations += 1

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

    def _withdraw(self, job_id: int, now: float) -> None:
        """The job leaves the decider (done, failed or cancelled)."""
        gjob = self.decider.jobs.get(job_id)
        if gjob is None or gjob.finished:
            return
        if gjob.group >= 0:
            self._apply(self.decider.job_finished(job_id, self.decision_time(now)), now)
        elif gjob in self.decider.queue:
            # Still queued: the decider has no withdraw, and nothing else refers to it.
            self.decider.queue.remove(gjob)
            gjob.finished = True

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
                    self.store.finish(job_id, "rejected", str(reason), now)
                case Start(job_id=job_id, running=True):
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
        self._save_counts(step)

    def _save_counts(self, step: Step) -> None:
        """Per job: suspensions and migrations (this run's plus earlier runs') and the
        partner, written where they changed. Only the jobs a step can change are looked
        at: those its actions name and those in GPU sets (a finish changes its partner's)."""
        ids: set[int] = set()
        for action in step.actions:
            match action:
                case Pack(guest_id=guest, host_id=host) | Unpack(guest_id=guest, host_id=host):
                    ids.update((guest, host))
                case Reject():
                    pass
                case _:
                    ids.add(action.job_id)
        for group in self.decider.sets:
            ids.update(j.id for j in group.jobs())
        for job_id in ids | self._packed_shown:
            self._save_count(job_id)

    def _save_count(self, job_id: int) -> None:
        gjob = self.decider.jobs.get(job_id)
        base = self._base.get(job_id)
        if gjob is None or base is None:
            return
        group = self.decider.group(gjob.group) if gjob.group >= 0 else None
        partner = None
        if group is not None:
            partner = next((j.id for j in group.unit_of(gjob).jobs if j is not gjob), None)
        row = GandivaJobRow(
            job_id, base.suspensions + gjob.suspensions, base.migrations + gjob.migrations, partner
        )
        shown = self._shown.get(job_id)
        if shown == row or (shown is None and row == GandivaJobRow(job_id)):
            return
        self.store.save_gandiva_job(row)
        self._shown[job_id] = row
        if partner is None:
            self._packed_shown.discard(job_id)
        else:
            self._packed_shown.add(job_id)

    # ---- processes -----------------------------------------------------------------

    def wanted(self) -> dict[int, Where]:
        """Every job of a set's running unit, where it must run now."""
        out: dict[int, Where] = {}
        for group in self.decider.sets:
            for gjob in group.running_jobs():
                out[gjob.id] = Where(group.node, group.gpus)
        return out

    def _reconcile(self, now: float) -> None:
        wanted = self.wanted()
        for job_id, lease_id in list(self.lease_of.items()):
            if (
                lease_id not in self.stopping
                and wanted.get(job_id) != self.where_of_lease[lease_id]
            ):
                self._stop(lease_id)
        busy = {
            (w.node, g)
            for lease_id in self.stopping
            for w in (self.where_of_lease[lease_id],)
            for g in w.gpus
        }
        for job_id, where in wanted.items():
            if job_id in self.lease_of or job_id not in self._static:
                continue  # running there already, or its previous process is stopping
            if any((where.node, g) in busy for g in where.gpus):
                continue  # the outgoing unit has not let go of the GPUs yet
            self._launch(job_id, where, now)
        self._write_partners()
        horizon = self.horizon_s
        for lease_id in self.lease_of.values():  # renew the horizon before it runs out
            lease = self.table.get(lease_id)
            if lease is None or lease_id in self.stopping or lease.steps >= lease.until_step:
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

    def checkpoint_dir(self, job_id: int) -> Path:
        return self._ckpt_root / f"job-{job_id}"

    def partner_file(self, job_id: int) -> Path:
        """The job type of the job whose process shares this job's GPU now (empty when
        alone), for the job to read (``live/gandiva/emulate.py`` steps at its pair rate)."""
        return self.checkpoint_dir(job_id) / "gandiva-partner"

    def _write_partners(self) -> None:
        """Write each running process's partner where it changed. The partner is the other
        live process on its GPU (not the decider's plan: a guest waiting for its launch
        does not slow its host yet)."""
        on_gpu: dict[tuple[int, int], list[int]] = {}
        for job_id, lease_id in self.lease_of.items():
            if lease_id in self.stopping:
                continue
            where = self.where_of_lease[lease_id]
            if len(where.gpus) == 1:
                on_gpu.setdefault((where.node, where.gpus[0]), []).append(job_id)
        for job_id, lease_id in self.lease_of.items():
            if lease_id in self.stopping:
                continue
            where = self.where_of_lease[lease_id]
            others = on_gpu.get((where.node, where.gpus[0]), []) if len(where.gpus) == 1 else []
            partner = next((self._static[o].job_type for o in others if o != job_id), "")
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
        job = self._static[job_id]
        group_model = self.cluster.spec.nodes[where.node].gpu
        gpu_type = group_model.name
        milli = PACKABLE_SHARE_MILLI if len(where.gpus) == 1 else MILLI_PER_GPU
        part = Assignment(job_id, where.node, where.gpus, milli, 0, 0)
        entry = PlannedEntity((job_id,), gpu_type, (part,), False, (job.steps,), (0.0,))
        self._launch_seq += 1
        lease_id = f"{job_id}-g{self._launch_seq}-{uuid.uuid4().hex[:8]}"
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
            job_user=self.config.job_user,
        )
        env = dict(spec.env)
        env[ENV_PARTNER_FILE] = str(self.partner_file(job_id))
        # A one-GPU job may be packed at any time without a relaunch, so it is launched as
        # the half-GPU share Ray reserves for it: under ``--sharing`` (SharedExecutor) that
        # puts it under the share runtime, beside whichever partner comes.
        spec = replace(spec, env=tuple(sorted(env.items())), gpu_milli=milli)
        self._write_partner(job_id, "")  # written again after the launches if it has one
        lease = LiveLease(
            lease_id=lease_id,
            job_id=job_id,
            round_idx=self._launch_seq,
            gpu_type=gpu_type,
            type_index=self._model_index[gpu_type],
            world_size=len(spec.ranks),
            total_steps=job.steps,
            until_step=job.steps,
            deadline=now + self.horizon_s,
            launched_at=now,
            steps_at_launch=self.durable.get(job_id, 0.0),
            measured_grant=True,
        )
        self.table.add(lease)
        parts = [(where.node, where.gpus, milli)]
        self.store.add_lease(lease_id, job_id, self._launch_seq, gpu_type, parts, now)
        index = "-".join(str(g) for g in where.gpus)
        self.store.mark_running(job_id, lease_id, gpu_type, index, now)
        self.lease_of[job_id] = lease_id
        self.job_of_lease[lease_id] = job_id
        self.where_of_lease[lease_id] = where
        self.executor.launch(spec)
        self.counters.launches += 1

    def _stop(self, lease_id: str) -> None:
        self.table.stop(lease_id)
        self.executor.stop(lease_id, self.config.grace_s)
        self.stopping.add(lease_id)
        self.counters.stops += 1

    def _on_exit(self, report: ExitReport, now: float) -> None:
        job_id = self.job_of_lease.pop(report.lease_id, None)
        if job_id is None:
            return
        lease = self.table.end(report.lease_id)
        stopped = report.lease_id in self.stopping
        self.stopping.discard(report.lease_id)
        self.where_of_lease.pop(report.lease_id, None)
        self._windows.pop(report.lease_id, None)
        if self.lease_of.get(job_id) == report.lease_id:
            del self.lease_of[job_id]
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
            all_steps_reported=steps >= job.steps,
        )
        if report.lost and not job.cancel_requested:
            self.counters.lost += 1
        if outcome.retry:
            self.counters.retries += 1
        self.durable[job_id] = outcome.steps_done
        if outcome.state in ("done", "failed", "cancelled"):
            self._withdraw(job_id, now)
        # "queued": the job stays in its set; the next reconcile relaunches it there from
        # its checkpoint if its unit holds the GPUs (a lost or retried process).

    def _cancel(self, job: JobRow, now: float) -> None:
        lease_id = self.lease_of.get(job.id)
        if lease_id is not None:
            if lease_id not in self.stopping:
                self._stop(lease_id)
            return  # cancelled when the process is gone
        self.store.finish(job.id, "cancelled", "cancelled by the user", now)
        self._withdraw(job.id, now)

    # ---- reading -------------------------------------------------------------------

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {
            f"gandiva_{f.name}_total": getattr(self.counters, f.name) for f in fields(self.counters)
        }
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
            for lease_id in list(self.lease_of.values()):
                if lease_id not in self.stopping:
                    self._stop(lease_id)
