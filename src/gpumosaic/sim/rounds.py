"""Gavel's round-based mechanism (OSDI'20), fractional-aware, through the placement layer.

Time moves in rounds. At each round boundary:

1. jobs that arrived by now join (a job arriving mid-round waits for the boundary);
2. the policy is re-solved if a job arrived or completed since the last solve, at most
   once per ``resolve_interval_s`` (Gavel: 1920 s; as in Gavel, a solve at t = 0 does not
   start that interval, and a solve is forced when nothing can run and nothing else will
   arrive); jobs that arrived after the last solve are not in the allocation and wait;
3. the entities (jobs, or packed pairs) most behind their allocation are chosen per GPU
   type (``round_priorities``), counting GPU capacity in milli so that fractional jobs
   share GPUs;
4. the chosen entities are placed (``round_leases``): those running on the same type
   again keep their GPUs (lease extension), the others go through the placement strategy;
5. each placed job runs min(int(rate x round_s), remaining) steps and stops at
   now + steps / rate; the round ends when its last job stops (so at most ``round_s``
   later, less when every job finishes early) and only then are GPUs freed.

JCT = time of the job's last step - arrival. The run stops when every job (or every job
of the workload's measurement window) is done. Per-job state lives in arrays, the
timeline gets one sample per round, and nothing is logged per round.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import numpy as np

from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.base import PlacementStrategy
from gpumosaic.placement.workload import TargetWorkload
from gpumosaic.policies.base import Policy
from gpumosaic.sharing.speed import SpeedModel
from gpumosaic.sim.policy_input import DEFAULT_PAIR_PARTNERS, fixed_type_order
from gpumosaic.sim.result import RunStats, SimResult, TimelineRecorder
from gpumosaic.sim.round_jobs import JobStore, round_steps
from gpumosaic.sim.round_leases import LeaseBook
from gpumosaic.sim.round_priorities import select_entities
from gpumosaic.sim.round_sharing import shared_rates
from gpumosaic.sim.round_solver import AllocationBook
from gpumosaic.sim.round_tracker import RoundTracker
from gpumosaic.workloads.workload import Workload

# Steps below this are a finished job (the arithmetic of float step counts).
_STEP_EPS = 1e-6


@dataclass(frozen=True, slots=True)
class RoundConfig:
    round_s: float = 360.0
    resolve_interval_s: float = 1920.0
    span_nodes: bool = True  # a multi-GPU job may span nodes (Gavel's one-GPU servers)
    pair_partners: int = DEFAULT_PAIR_PARTNERS  # candidate partners per job when packing
    symmetric_fast_path: bool = True  # see round_leases: identical one-GPU nodes

    def __post_init__(self) -> None:
        if self.round_s <= 0:
            raise ValueError("round_s must be > 0")
        if self.resolve_interval_s < 0:
            raise ValueError("resolve_interval_s must be >= 0")


def run_rounds(
    cluster: ClusterSpec,
    workload: Workload,
    policy: Policy | str,
    placement: str | PlacementStrategy = "strided",
    seed: int = 0,
    round_s: float = 360.0,
    resolve_interval_s: float = 1920.0,
    progress: Callable[[float], None] | None = None,
    *,
    span_nodes: bool = True,
    pair_partners: int = DEFAULT_PAIR_PARTNERS,
    symmetric_fast_path: bool = True,
    speed: SpeedModel | None = None,
) -> SimResult:
    """Simulate ``workload`` on ``cluster`` with Gavel's round mechanism (see module doc);
    ``speed`` adds a sharing model (``sim/round_sharing.py``)."""
    config = RoundConfig(
        round_s, resolve_interval_s, span_nodes, pair_partners, symmetric_fast_path
    )
    simulator = RoundSimulator(cluster, workload, policy, placement, seed, config, progress, speed)
    return simulator.run()


class RoundSimulator:
    def __init__(
        self,
        cluster: ClusterSpec,
        workload: Workload,
        policy: Policy | str,
        placement: str | PlacementStrategy,
        seed: int,
        config: RoundConfig,
        progress: Callable[[float], None] | None = None,
        speed: SpeedModel | None = None,
    ) -> None:
        self.speed = speed
        self.cluster = cluster
        self.workload = workload
        self.config = config
        self.progress = progress
        if isinstance(policy, str):
            from gpumosaic.policies.registry import build_policy

            # Gandiva pairs jobs at random: its stream follows the run's seed.
            options = {"seed": seed} if policy.startswith("gandiva") else {}
            policy = build_policy(policy, **options)
        self.policy = policy
        self.fixed_order = fixed_type_order(policy.name)
        self.skip_zero_priority = policy.name.lower().startswith("fifo")
        self.target = TargetWorkload.from_jobs(workload.target_sample())
        if isinstance(placement, str):
            from gpumosaic.placement.registry import build_placement

            placement = build_placement(placement, self.target)
        shuffle_rng, place_rng = np.random.default_rng(seed).spawn(2)
        self.shuffle_rng = shuffle_rng
        self.models = cluster.gpu_models
        self.type_names = tuple(m.name for m in self.models)
        self.state = ClusterState(cluster)
        self.tracker = RoundTracker(self.state, self.target)
        self.leases = LeaseBook(
            self.state,
            self.tracker,
            placement,
            self.type_names,
            place_rng,
            config.span_nodes,
            config.symmetric_fast_path,
        )
        per_model = cluster.gpus_per_model()
        self.capacity_gpus = np.array([float(per_model[n]) for n in self.type_names])
        self.capacity_milli = [int(c) * MILLI_PER_GPU for c in self.capacity_gpus]
        self.jobs = JobStore(len(self.models))
        self.timeline = TimelineRecorder()
        self.book = AllocationBook(
            policy, self.models, self.capacity_gpus, config.round_s, config.pair_partners
        )
        self.need_solve = False
        self.rounds = 0
        self.events = 0
        # Arrivals.
        self._stream: Iterator[JobSpec] = iter(workload.jobs)
        self._next: JobSpec | None = next(self._stream, None)
        self.measured_left = (
            workload.measure[1] - workload.measure[0] if workload.measure is not None else -1
        )
        self.completed = 0
        self._reported = -1.0

    # ---- main loop -------------------------------------------------------------------

    def run(self) -> SimResult:
        started = time.perf_counter()
        now = self._next.arrival_s if self._next is not None else 0.0
        forced_at = float("nan")
        while True:
            self._admit(now)
            if self._finished():
                break
            if self.need_solve and self._solve_allowed(now):
                self._solve(now)
            placed = self._choose_and_place()
            self._sample(now, self._jobs_running(placed))
            if placed:
                now = self._run_round(now, placed)
                continue
            if self._next is not None:
                now = self._next.arrival_s  # nothing can run: skip to the next arrival
            elif self.jobs.active_rows and forced_at != now:
                forced_at = now  # Gavel forces a solve when the cluster would sit idle
                self._solve(now)
            else:
                break  # nothing can ever run (e.g. no throughput): the jobs stay queued
        self.leases.release_all()
        stats = RunStats(
            events=self.events,
            rounds=self.rounds,
            policy_solves=self.book.solves,
            policy_solve_s=self.book.solve_s,
            elapsed_s=time.perf_counter() - started,
        )
        counts = self.leases.counts()
        extra = (
            ("lease_extensions", float(counts.extensions)),
            ("lease_opportunities", float(counts.opportunities)),
            ("placement_failures", float(counts.failures)),
            ("placement_s", self.leases.seconds),
            ("fast_placements", float(self.leases.fast_placements)),
        )
        return SimResult(
            records=self.jobs.records(self.type_names),
            timeline=self.timeline.freeze(),
            stats=stats,
            total_gpu_milli=self.state.total_gpu_milli,
            end_s=now,
            extra=extra,
        )

    def _finished(self) -> bool:
        if self.workload.measure is not None:
            return self.measured_left <= 0
        return self._next is None and not self.jobs.active_rows

    # ---- arrivals --------------------------------------------------------------------

    def _admit(self, now: float) -> None:
        while self._next is not None and self._next.arrival_s <= now:
            job = self._next if self.speed is None else self.speed.admit(self._next)
            self._next = next(self._stream, None)
            self.events += 1
            rates = np.array([self._rate(job, m) for m in self.models])
            measured = self.workload.is_measured(job.id)
            row = self.jobs.add(job, rates, measured)
            reason = ""
            if job.num_gpu == 0 or not self._could_ever_fit(job, rates):
                reason = "never fits: no node can hold it (or it asks for no GPU)"
            elif not (rates > 0).any():
                reason = "no throughput on any GPU model of the cluster"
            if reason:
                self.jobs.reject(row, reason)
                self._count_done(measured)
                continue
            self.jobs.activate(row)
            self.need_solve = True

    def _could_ever_fit(self, job: JobSpec, rates: np.ndarray) -> bool:
        if self.state.fits_when_empty(job):
            return True
        if not (self.config.span_nodes and job.num_gpu > 1):
            return False
        # Spanning nodes: enough GPUs of one model the job can use.
        return any(rates[t] > 0 and self.capacity_gpus[t] >= job.num_gpu for t in range(len(rates)))

    def _rate(self, job: JobSpec, model: object) -> float:
        if not job.allows(model.name):  # type: ignore[attr-defined]
            return 0.0
        try:
            return float(self.workload.throughputs.rate(job, model))  # type: ignore[arg-type]
        except KeyError:
            return 0.0

    def _count_done(self, measured: bool) -> None:
        self.completed += 1
        if measured and self.measured_left > 0:
            self.measured_left -= 1
        if self.progress is not None:
            fraction = self._fraction_done()
            if fraction - self._reported >= 0.002 or fraction >= 1.0:
                self._reported = fraction
                self.progress(fraction)

    def _fraction_done(self) -> float:
        if self.workload.measure is not None:
            total = self.workload.measure[1] - self.workload.measure[0]
            return 1.0 - self.measured_left / total
        jobs = self.workload.jobs
        total = len(jobs) if hasattr(jobs, "__len__") else 0  # type: ignore[arg-type]
        return self.completed / total if total else 0.0

    # ---- policy ----------------------------------------------------------------------

    def _solve_allowed(self, now: float) -> bool:
        last = self.book.last_reset_s
        # Gavel also re-solves while its last reset is still the one at time 0.
        return now - last >= self.config.resolve_interval_s or last == 0.0

    def _solve(self, now: float) -> None:
        self.book.solve(now, self.jobs, self.workload.throughputs)
        self.events += 1
        self.need_solve = False

    # ---- one round -------------------------------------------------------------------

    def _choose_and_place(self) -> list[tuple[int, int]]:
        ent = self.book.entities
        if ent is None or not self.jobs.active_rows:
            self.leases.start_round([], self.jobs.is_active)
            return []
        active = self.jobs.is_active
        alive = active[ent.rows_a] & ((ent.rows_b < 0) | active[np.maximum(ent.rows_b, 0)])
        n_types = len(self.models)
        if self.fixed_order:
            order = list(range(n_types))
        else:
            order = self.shuffle_rng.permutation(n_types).tolist()
        chosen = select_entities(ent, alive, order, self.capacity_milli, self.skip_zero_priority)
        requests = []
        for e, t in chosen:
            a, b = int(ent.rows_a[e]), int(ent.rows_b[e])
            spec = self.jobs.specs[a]
            if b >= 0:  # a pair shares the GPUs of its members: whole GPUs, same count
                spec = replace(spec, gpu_milli=MILLI_PER_GPU, cpu_milli=0, memory_mib=0)
            requests.append(((a, b), t, spec))
        placed = self.leases.start_round(requests, active)
        return [chosen[i] for i in placed]

    def _run_round(self, now: float, placed: list[tuple[int, int]]) -> float:
        ent = self.book.entities
        assert ent is not None
        jobs = self.jobs
        r = self.config.round_s
        es = np.array([e for e, _ in placed], dtype=np.int64)
        ts = np.array([t for _, t in placed], dtype=np.int64)
        rows_a, rows_b = ent.rows_a[es], ent.rows_b[es]
        rate_a = ent.rate_a[es, ts]
        if self.speed is not None:
            rate_a = shared_rates(
                self.speed, self.leases, self.state, jobs, rows_a, rows_b, rate_a, r
            )
        finish_a, steps_a = round_steps(rate_a, jobs, rows_a, now, r)
        pair = rows_b >= 0
        finish = finish_a.copy()
        if pair.any():
            finish_b, steps_b = round_steps(
                ent.rate_b[es[pair], ts[pair]], jobs, rows_b[pair], now, r
            )
            finish[pair] = np.maximum(finish_a[pair], finish_b)
        end = float(finish.max())
        if end <= now:  # only zero-step jobs (cannot happen with positive rates)
            end = now + r
        executed = finish - now
        ent.time[es, ts] += executed
        np.add.at(ent.type_total, ts, executed)
        held = end - now
        share = np.where(pair, 0.5, 1.0)
        self._credit(rows_a, steps_a, executed, held * share, ts, now)
        if pair.any():
            self._credit(rows_b[pair], steps_b, executed[pair], held * 0.5, ts[pair], now)
        done_rows: list[int] = []
        done_at: list[float] = []
        self._collect_done(rows_a, finish_a, done_rows, done_at)
        if pair.any():
            self._collect_done(rows_b[pair], finish_b, done_rows, done_at)
        if done_rows:
            jobs.complete(done_rows, done_at)
            self.leases.forget(done_rows)
            self.need_solve = True
            for row in done_rows:
                self.events += 1
                self._count_done(jobs.measured[row])
        self.rounds += 1
        return end

    def _credit(
        self,
        rows: np.ndarray,
        steps: np.ndarray,
        executed: np.ndarray,
        held: np.ndarray | float,
        ts: np.ndarray,
        now: float,
    ) -> None:
        jobs = self.jobs
        jobs.done_steps[rows] += steps
        demand = jobs.demand_milli[rows]
        jobs.attained_s[rows] += executed * demand / MILLI_PER_GPU
        jobs.milli_s[rows] += demand * held
        fresh = np.isnan(jobs.start_s[rows])
        if fresh.any():
            jobs.start_s[rows[fresh]] = now
            jobs.first_type[rows[fresh]] = ts[fresh]

    def _collect_done(
        self, rows: np.ndarray, finish: np.ndarray, out_rows: list[int], out_at: list[float]
    ) -> None:
        jobs = self.jobs
        left = jobs.total_steps[rows] - jobs.done_steps[rows]
        done = left <= _STEP_EPS * np.maximum(jobs.total_steps[rows], 1.0)
        out_rows.extend(rows[done].tolist())
        out_at.extend(finish[done].tolist())

    def _jobs_running(self, placed: list[tuple[int, int]]) -> int:
        ent = self.book.entities
        if ent is None or not placed:
            return 0
        return len(placed) + sum(1 for e, _ in placed if ent.rows_b[e] >= 0)

    def _sample(self, now: float, running: int) -> None:
        tracker = self.tracker
        tracker.refresh()
        gpu_w, cpu_w = tracker.power_w
        self.timeline.record(
            now,
            tracker.allocated_milli,
            running,
            len(self.jobs.active_rows) - running,
            tracker.fragmentation_rate,
            gpu_w,
            cpu_w,
        )
