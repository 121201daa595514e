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

Progress is counted no further than the last checkpoint: when a process ends without
saving its last steps, the job's steps go back to its checkpoint (and the decider is
told so at the next round it runs in).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gpumosaic.lease import read_checkpoint_steps
from gpumosaic.live.rounds.cluster import LiveCluster
from gpumosaic.live.rounds.decider import LiveRoundDecider, PriorThroughputs
from gpumosaic.live.rounds.executor import Executor, ExitReport, LaunchSpec, RankLaunch
from gpumosaic.live.rounds.leases import LeaseTable, LiveLease
from gpumosaic.live.rounds.store import JobRow, LeaseRow, Store
from gpumosaic.mechanisms.rounds.decision import PlannedEntity, RoundPlan, RoundReport
from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.job import JobSpec

RATE_EMA_ALPHA = 0.5  # Gavel's throughput EMA
# Where this gpumosaic is installed: put on the job's PYTHONPATH so that
# ``import gpumosaic.lease`` works in a job started from a source checkout too.
PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])


@dataclass(frozen=True, slots=True)
class DriverConfig:
    round_s: float = 360.0
    grace_s: float = 10.0  # SIGTERM -> SIGKILL
    max_retries: int = 2  # a failing job runs at most 1 + max_retries times
    poll_s: float = 0.05
    server_url: str = "http://127.0.0.1:8470"
    token: str = ""
    data_dir: str = "."  # logs/ and checkpoints/ live under it

    @property
    def checkpoint_root(self) -> Path:
        return Path(self.data_dir) / "checkpoints"

    @property
    def log_root(self) -> Path:
        return Path(self.data_dir) / "logs"


@dataclass(slots=True)
class _Held:
    """When a job ran in the current round: from the later of the round's (or its
    launch's) start and its process's first call to the lease API (a job is not credited
    with time it spent starting), to its exit or the round's end."""

    start: float
    lease_id: str
    end: float | None = None
    contacted_at: float | None = None  # kept when the lease ends


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
    boundary_s: list[float] = field(default_factory=list)  # decision time per boundary


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
    ) -> None:
        self.store = store
        self.table = table
        self.executor = executor
        self.decider = decider
        self.cluster = cluster
        self.priors = priors
        self.config = config
        self.clock = clock
        self.on_plan = on_plan
        self.epoch = store.epoch(clock())
        self.row_of: dict[int, int] = {}
        self.total_of: dict[int, float] = {}
        self.credited: dict[int, float] = {}
        self.lease_of: dict[int, str] = {}  # job -> its live lease (processes exist)
        self.job_of_lease: dict[str, int] = {}
        self.stopping: set[str] = set()
        self.pending: dict[int, LaunchSpec] = {}  # launches waiting for the old process
        self.measured: dict[int, set[int]] = {}  # job -> types with a measured rate
        self.held: dict[int, _Held] = {}
        self.last_lease: dict[int, tuple[float, float, float, str]] = {}
        self.plan: RoundPlan | None = None
        self.round_idx = store.last_round()
        self.round_end = 0.0
        self.counters = DriverCounters()
        self._forced_at = -1.0
        self._cancels_seen = -1
        self._admitted_seen = -1
        self.estimates: dict[tuple[int, str], tuple[float, int]] = {}  # (rate, samples)
        self.durable: dict[int, float] = {}  # job -> steps that survive (as in the store)
        self._static: dict[int, JobRow] = {}  # what never changes about a job (its submission)
        self._log_root = config.log_root.resolve()
        self._ckpt_root = config.checkpoint_root.resolve()
        # Leases built for this round, until launched: (lease, parts).
        self._lease_specs: dict[str, tuple[LiveLease, list[tuple[int, tuple[int, ...], int]]]] = {}
        self._lock = threading.Lock()  # boundary and tick never overlap
        self.type_index = {name: i for i, name in enumerate(decider.type_names)}

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
            _stop_local_process(lease, self.config.grace_s)
        for job in self.store.jobs(live_only=True):
            on_disk = read_checkpoint_steps(self.checkpoint_dir(job.id))
            if on_disk is not None and on_disk > job.checkpoint_steps:
                self.store.record_checkpoint(job.id, on_disk, now)
                self.store.record_progress(job.id, on_disk)
        self._admit(now)
        return stale

    # ---- the boundary --------------------------------------------------------------

    def boundary(self, now: float) -> RoundPlan:
        with self._lock, self.store.batch():
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
        n = len(plan)
        ran = np.zeros(n)
        steps_a, steps_b = np.zeros(n), np.zeros(n)
        finish_a, finish_b = np.full(n, now), np.full(n, now)
        attained: list[tuple[float, int]] = []
        rates: list[tuple[int, str, float, int]] = []
        for i, entry in enumerate(plan.entries):
            for k, job_id in enumerate(entry.job_ids):
                steps_now = self._steps_now(job_id)
                delta = steps_now - self.credited.get(job_id, 0.0)
                self.credited[job_id] = steps_now
                held = self.held.get(job_id)
                start, end = self._ran(held, now)
                if k == 0:
                    steps_a[i], finish_a[i] = delta, end
                    ran[i] = max(end - start, 0.0)
                else:
                    steps_b[i], finish_b[i] = delta, end
                if held is not None:
                    gpu_s = max(end - start, 0.0) * self._demand(job_id) / MILLI_PER_GPU
                    attained.append((gpu_s, job_id))
                self._observe_rate(job_id, entry.gpu_type, rates)
        report = RoundReport(
            self.decision_time(now),
            ran,
            steps_a,
            steps_b,
            finish_a - self.epoch,
            finish_b - self.epoch,
        )
        self.decider.report(plan, report)
        self.store.save_round_measures(attained, rates)
        self.store.end_round(self.round_idx, now)
        self.held.clear()
        self.plan = None

    def _ran(self, held: _Held | None, now: float) -> tuple[float, float]:
        """(start, end) of the job's running time this round (start == end: none)."""
        if held is None:
            return now, now
        end = held.end if held.end is not None else now
        contacted = held.contacted_at
        if held.end is None:
            lease = self.table.get(held.lease_id)
            contacted = lease.contacted_at if lease is not None else None
        if contacted is None:
            return end, end
        return min(max(held.start, contacted), end), end

    def _observe_rate(
        self, job_id: int, gpu_type: str, out: list[tuple[int, str, float, int]]
    ) -> None:
        """Rate of the job's current (or just ended) lease on ``gpu_type``."""
        lease_id = self.lease_of.get(job_id)
        if lease_id is not None and lease_id not in self.stopping:
            lease = self.table.get(lease_id)
            if lease is None:
                return
            steps, iter_s, base, lease_type = (
                lease.steps,
                lease.iter_s,
                lease.steps_at_launch,
                lease.gpu_type,
            )
        else:
            last = self.last_lease.pop(job_id, None)
            if last is None:
                return
            steps, iter_s, base, lease_type = last
        if lease_type != gpu_type or iter_s <= 0 or steps - base < 1:
            return
        measured = (steps - base) / iter_s
        old = self.estimates.get((job_id, gpu_type))
        if old is None:
            rate, samples = measured, 1
        else:
            rate, samples = RATE_EMA_ALPHA * measured + (1 - RATE_EMA_ALPHA) * old[0], old[1] + 1
        self.estimates[(job_id, gpu_type)] = (rate, samples)
        out.append((job_id, gpu_type, rate, samples))
        t = self.type_index[gpu_type]
        self.decider.observe_rate(self.row_of[job_id], t, rate)
        self.measured.setdefault(job_id, set()).add(t)

    def _apply(self, plan: RoundPlan, now: float) -> None:
        self.round_idx += 1
        self.plan = plan if len(plan) else None
        self.round_end = now + self.config.round_s
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
            measured = t in self.measured.get(job_id, set())
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
                self.held[job_id] = _Held(now, current)
                continue
            spec = self._launch_spec(job_id, entry, until, measured, now)
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
        reports = self.executor.poll()
        if reports:
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

    def round_over(self, now: float) -> bool:
        """The round ends at its end time, or once every planned lease has used its grant
        (parked) or exited; an idle service starts a round as soon as a job arrives."""
        if now >= self.round_end:
            return True
        if self.plan is None:
            return self._unadmitted() or (self.decider.has_active_jobs and not self.lease_of)
        if self.pending:
            return False
        for entry in self.plan.entries:
            for job_id in entry.job_ids:
                lease_id = self.lease_of.get(job_id)
                if lease_id is None or lease_id in self.stopping:
                    continue
                lease = self.table.get(lease_id)
                if lease is not None and not lease.parked:
                    return False
        return True

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
            spec = job_spec(job, self.decision_time(job.submitted_at))
            rates = np.array([self.priors.rate(spec, m) for m in self.decider.models])
            measured = self.store.throughput_samples(job.id)
            for name, (rate, samples) in measured.items():
                self.estimates[(job.id, name)] = (rate, samples)
                if name in self.type_index:
                    rates[self.type_index[name]] = rate
                    self.measured.setdefault(job.id, set()).add(self.type_index[name])
            for i, m in enumerate(self.decider.models):
                if not spec.allows(m.name):
                    rates[i] = 0.0
            row = self.decider.admit(spec, rates)
            self.row_of[job.id] = row
            self._static[job.id] = job
            self.total_of[job.id] = job.steps
            if row in self.decider.jobs.rejected:
                self.store.finish(job.id, "rejected", self.decider.jobs.rejected[row], now)
                continue
            self.durable[job.id] = job.steps_done
            if job.steps_done > 0:
                self.decider.restore_progress(row, job.steps_done)
            self.credited[job.id] = job.steps_done

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
        self, job_id: int, entry: PlannedEntity, until: float, measured: bool, now: float
    ) -> LaunchSpec:
        job = self._static[job_id]
        lease_id = f"{job_id}-{self.round_idx}-{uuid.uuid4().hex[:8]}"
        ranks: list[RankLaunch] = []
        for part in entry.parts:
            slot = self.cluster.slots[part.node]
            devices = self.cluster.devices(part.node, part.gpus)
            for d in devices:
                ranks.append(
                    RankLaunch(
                        len(ranks), slot.ray_node_id, slot.ip, (d,), part.gpu_milli / MILLI_PER_GPU
                    )
                )
        if job.num_gpu > 1 and len(ranks) != job.num_gpu:
            raise AssertionError("a gang got a different number of GPUs than it asked for")
        ckpt = self.checkpoint_dir(job_id)  # made by the executor, on the job's node
        env = dict(job.env)
        env.update(
            {
                "GPUMOSAIC_JOB_ID": str(job_id),
                "GPUMOSAIC_SERVER": self.config.server_url,
                "GPUMOSAIC_LEASE_ID": lease_id,
                "GPUMOSAIC_CHECKPOINT_DIR": str(ckpt),
                "GPUMOSAIC_GPU_MILLI": str(job.gpu_milli),
                "GPUMOSAIC_GPU_MODEL": entry.gpu_type,
                "GPUMOSAIC_TOTAL_STEPS": f"{job.steps:g}",
                "PYTHONPATH": os.pathsep.join(
                    p
                    for p in (PACKAGE_ROOT, env.get("PYTHONPATH", os.environ.get("PYTHONPATH", "")))
                    if p
                ),
            }
        )
        if self.config.token:
            env["GPUMOSAIC_TOKEN"] = self.config.token
        lease = LiveLease(
            lease_id=lease_id,
            job_id=job_id,
            round_idx=self.round_idx,
            gpu_type=entry.gpu_type,
            type_index=self.type_index[entry.gpu_type],
            world_size=len(ranks),
            total_steps=job.steps,
            until_step=until,
            deadline=self.round_end,
            launched_at=now,
            steps_at_launch=0.0,
            measured_grant=measured,
        )
        self._lease_specs[lease_id] = (
            lease,
            [(p.node, tuple(p.gpus), p.gpu_milli) for p in entry.parts],
        )
        return LaunchSpec(
            lease_id=lease_id,
            job_id=job_id,
            command=job.command,
            workdir=job.workdir,
            env=tuple(sorted(env.items())),
            log_path=str(self._log_root / f"job-{job_id}.log"),
            gpu_model=entry.gpu_type,
            gpu_milli=job.gpu_milli,
            ranks=tuple(ranks),
        )

    def _launch(self, spec: LaunchSpec, now: float) -> None:
        lease, parts = self._lease_specs.pop(spec.lease_id)
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
        self.held[spec.job_id] = _Held(now, spec.lease_id)
        self.executor.launch(spec)
        self.counters.launches += 1

    def _stop(self, job_id: int, lease_id: str) -> None:
        self.table.stop(lease_id)
        self.executor.stop(lease_id, self.config.grace_s)
        self.stopping.add(lease_id)
        self.counters.stops += 1

    def _on_exit(self, report: ExitReport, now: float) -> None:
        job_id = self.job_of_lease.pop(report.lease_id, None)
        if job_id is None:
            return
        lease = self.table.end(report.lease_id)  # from now on its calls are fenced
        stopped = report.lease_id in self.stopping
        self.stopping.discard(report.lease_id)
        if self.lease_of.get(job_id) == report.lease_id:
            del self.lease_of[job_id]
        held = self.held.get(job_id)
        if held is not None and held.end is None and held.lease_id == report.lease_id:
            held.end = now
            held.contacted_at = lease.contacted_at if lease is not None else None
        job = self.store.job(job_id)
        assert job is not None
        steps = lease.steps if lease is not None else job.steps_done
        if lease is not None:
            self.last_lease[job_id] = (
                lease.steps,
                lease.iter_s,
                lease.steps_at_launch,
                lease.gpu_type,
            )
        code = report.exit_code
        how = "lost: " + report.detail if report.lost else ("stopped" if stopped else "exited")
        self.store.end_lease(report.lease_id, now, how, code)
        kept = job.checkpoint_steps  # what survives this process

        def ended(state: str, steps_done: float, attempts: int, reason: str) -> None:
            row = self.row_of.get(job_id)
            if state == "queued" and row is not None and not self.decider.jobs.is_active[row]:
                # The decider already counted all its steps (it will never plan it again):
                # the work is done even though this last process did not end cleanly.
                state, steps_done = "done", job.steps
                reason = "all steps reported" + (f"; {reason}" if reason else "")
            self.durable[job_id] = steps_done
            self.store.process_ended(
                job_id,
                state=state,
                steps_done=steps_done,
                attempts=attempts,
                exit_code=code,
                log_tail=report.log_tail,
                reason=reason,
                now=now,
            )
            if state in ("done", "failed", "cancelled"):
                self.pending.pop(job_id, None)
                planned = self.plan is not None and any(
                    job_id in e.job_ids for e in self.plan.entries
                )
                if state != "done" or not planned:  # a planned one is credited at round end
                    self._withdraw(job_id, now)

        if job.cancel_requested:
            ended("cancelled", kept, job.attempts, "cancelled by the user")
        elif report.lost:
            self.counters.lost += 1
            self.pending.pop(job_id, None)
            reason = f"lease lost ({report.detail}); back in the queue at its last checkpoint"
            ended("queued", kept, job.attempts, reason)
        elif steps >= job.steps and (code == 0 or stopped):
            # All steps reported: done, even if our stop (the decider saw it finish at the
            # round's end) caught the process on its way out.
            ended("done", job.steps, job.attempts, "")
        elif code == 0 and (lease is None or not lease.contacted):
            ended("done", job.steps, job.attempts, "")  # a command that never used a lease
        else:
            # Not asked to stop, and an error or no step at all (Gavel's failed
            # micro-task): a failed attempt. Otherwise the lease simply ended.
            base = lease.steps_at_launch if lease is not None else job.steps_done
            if stopped or (code == 0 and steps > base):
                ended("queued", kept, job.attempts, "")
                return
            attempts = job.attempts + 1
            if attempts > job.max_retries:
                ended("failed", kept, attempts, f"exit code {code} after {attempts} attempt(s)")
                return
            self.counters.retries += 1
            ended("queued", kept, attempts, f"attempt {attempts} failed (exit code {code})")

    # ---- helpers -------------------------------------------------------------------

    def _steps_now(self, job_id: int) -> float:
        lease_id = self.lease_of.get(job_id)
        if lease_id is not None:
            lease = self.table.get(lease_id)
            if lease is not None:
                return lease.steps
        job = self.store.job(job_id)
        return job.steps_done if job is not None else 0.0

    def _demand(self, job_id: int) -> int:
        row = self.row_of[job_id]
        return int(self.decider.jobs.demand_milli[row])

    def shutdown(self) -> None:
        """Stop every lease (the service is going down on purpose)."""
        with self._lock:
            for job_id, lease_id in list(self.lease_of.items()):
                if lease_id not in self.stopping:
                    self._stop(job_id, lease_id)


def job_spec(job: JobRow, arrival_s: float) -> JobSpec:
    return JobSpec(
        id=job.id,
        arrival_s=max(arrival_s, 0.0),
        job_type=job.job_type or "job",
        num_gpu=job.num_gpu,
        gpu_milli=job.gpu_milli,
        work=job.steps,
        allowed_models=frozenset(job.gpu_models) or None,
        priority_weight=job.priority_weight,
        name=job.name,
    )


def _stop_local_process(lease: LeaseRow, grace_s: float) -> None:
    """Stop a process of a previous run if it still runs here; it is recognised by the
    lease id in its environment (never by its command line)."""
    pid = lease.pid
    if pid is None:
        return
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return  # gone, or not on this machine
    if f"GPUMOSAIC_LEASE_ID={lease.id}".encode() not in environ.split(b"\0"):
        return
    try:
        os.killpg(os.getpgid(pid), signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(os.getpgid(pid), signal.SIGKILL)
