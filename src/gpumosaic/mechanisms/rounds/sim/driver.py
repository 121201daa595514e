"""Gavel's round mechanism (OSDI'20), simulated: a clock and a progress model around the
clock-free ``RoundDecider`` (``mechanisms/rounds``).

Time moves in rounds. At each round boundary:

1. jobs that arrived by now join (a job arriving mid-round waits for the boundary);
2. the decider re-solves the policy if a job arrived or completed since the last solve,
   at most once per ``resolve_interval_s`` (Gavel: 1920 s; as in Gavel, a solve at t = 0
   does not start that interval, and this driver forces a solve when nothing can run and
   nothing else will arrive); jobs that arrived after the last solve wait;
3. the decider chooses the entities (jobs, or packed pairs) most behind their allocation
   per GPU type, counting GPU capacity in milli so that fractional jobs share GPUs, and
   places them: those running on the same type again keep their GPUs (lease extension),
   the others go through the placement strategy;
4. the progress model runs each placed job min(int(rate x round_s), remaining) steps,
   stopping at now + steps / rate (rates scaled by a sharing model if one is given); the
   round ends when its last job stops (so at most ``round_s`` later, less when every job
   finishes early) and only then are GPUs freed; the decider is told what ran.

JCT = time of the job's last step - arrival. The run stops when every job (or every job
of the workload's measurement window) is done. Per-job state lives in arrays, the
timeline gets one sample per round, and nothing is logged per round.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterator

import numpy as np

from gpumosaic.mechanisms.rounds.decision import (
    RoundConfig,
    RoundDecider,
    RoundPlan,
    RoundReport,
    round_kernel,
)
from gpumosaic.mechanisms.rounds.estimation import EstimationConfig, ThroughputEstimation
from gpumosaic.mechanisms.rounds.idle import force_solve_due
from gpumosaic.mechanisms.rounds.jobs import JobStore
from gpumosaic.mechanisms.rounds.policy_input import DEFAULT_PAIR_PARTNERS
from gpumosaic.mechanisms.rounds.sim.sharing import shared_rates
from gpumosaic.mechanisms.rounds.sim.tracker import RoundTracker
from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.gpu import GpuModel
from gpumosaic.model.job import JobSpec
from gpumosaic.placement.base import PlacementStrategy
from gpumosaic.placement.workload import TargetWorkload
from gpumosaic.policies.base import Policy
from gpumosaic.results.outcome import Outcome
from gpumosaic.results.result import (
    JobRecord,
    JobStatus,
    LeaseCounts,
    RunStats,
    SimResult,
    TimelineRecorder,
)
from gpumosaic.sharing.speed import SpeedModel
from gpumosaic.workloads.throughputs import GavelThroughputTable, KeyedThroughputs
from gpumosaic.workloads.workload import Workload

__all__ = ["RoundConfig", "RoundSimulator", "run_rounds"]


def run_rounds(
    cluster: ClusterSpec,
    workload: Workload,
    policy: Policy,
    placement: PlacementStrategy,
    rng: np.random.Generator,
    round_s: float = 360.0,
    resolve_interval_s: float = 1920.0,
    progress: Callable[[float], None] | None = None,
    *,
    span_nodes: bool = True,
    pair_partners: int = DEFAULT_PAIR_PARTNERS,
    symmetric_fast_path: bool = True,
    speed: SpeedModel | None = None,
) -> SimResult:
    """Simulate ``workload`` on ``cluster`` with Gavel's round mechanism (see module doc)
    and built objects (``run.build`` builds them from a description); ``speed`` adds a
    sharing model (``mechanisms/rounds/sim/sharing.py``)."""
    config = RoundConfig(
        round_s, resolve_interval_s, span_nodes, pair_partners, symmetric_fast_path
    )
    simulator = RoundSimulator(
        cluster, workload, policy, placement, config, progress, speed, rng=rng
    )
    return simulator.run()


class RoundSimulator:
    """The driver: arrivals, a simulated clock, a progress model; decisions are the
    ``RoundDecider``'s. ``on_plan`` sees every round's plan (tests, tracing)."""

    def __init__(
        self,
        cluster: ClusterSpec,
        workload: Workload,
        policy: Policy,
        placement: PlacementStrategy,
        config: RoundConfig,
        progress: Callable[[float], None] | None = None,
        speed: SpeedModel | None = None,
        on_plan: Callable[[RoundPlan], None] | None = None,
        *,
        rng: np.random.Generator,
        target: TargetWorkload | None = None,
        describe: bool | None = None,
        launch_latency_s: float = 0.0,
        estimation: EstimationConfig | None = None,
    ) -> None:
        """Built objects only (``run.build`` builds them from names). ``rng``: the run's
        Generator (the decider's type shuffle and placement draw from two streams
        spawned from it; a policy that draws was built with it). ``target``: the
        placement's target workload (default: the workload's sample). ``describe``:
        plans carry their entries as values (default: when ``on_plan`` is given; a hook
        that only counts rounds turns it off). ``launch_latency_s``: a job given a new lease
        (not an extension) starts stepping this long after the round starts and stops at
        the round's end (a live cluster's process start; ``sim-vs-live`` passes the value
        it measured live, docs/live.md). ``estimation``: the decider is not told the
        jobs' rates; it profiles and estimates them (``mechanisms/rounds/estimation.py``)
        from what each round measures, the table's true rate of the job on the model it
        ran on (``simulate --estimate-throughputs``)."""
        if not 0.0 <= launch_latency_s < float("inf"):
            raise ValueError("launch_latency_s must be finite and >= 0")
        self.launch_latency_s = launch_latency_s

        self.speed = speed
        self.cluster = cluster
        self.workload = workload
        self.config = config
        self.progress = progress
        self.on_plan = on_plan
        if target is None:
            target = TargetWorkload.from_jobs(workload.target_sample())
        shuffle_rng, place_rng = rng.spawn(2)
        self.models = cluster.gpu_models
        estimator = None
        # The true rates of the admitted jobs, by row, when the decider must estimate them.
        self._true_rates: np.ndarray | None = None
        if estimation is not None:
            reference = workload.throughputs
            if not isinstance(reference, GavelThroughputTable):
                reference = GavelThroughputTable.load()
            estimator = ThroughputEstimation(self.models, reference, estimation)
            self._true_rates = np.zeros((64, len(self.models)))
        self.decider = RoundDecider(
            cluster,
            policy,
            placement,
            workload.throughputs,
            config,
            shuffle_rng,
            place_rng,
            describe=on_plan is not None if describe is None else describe,
            estimation=estimator,
        )
        self.jobs: JobStore = self.decider.jobs
        self.tracker = RoundTracker(self.decider.state, target)
        self.timeline = TimelineRecorder()
        self.rounds = 0
        self.arrivals = 0
        self.completions = 0
        # Arrivals.
        self._stream: Iterator[JobSpec] = iter(workload.jobs)
        self._next: JobSpec | None = next(self._stream, None)
        self.measured_left = (
            workload.measure[1] - workload.measure[0] if workload.measure is not None else -1
        )
        self.completed = 0
        self._reported = -1.0
        # Isolated rates per (rate key, allowed models) seen so far (``_rate``).
        throughputs = workload.throughputs
        self._rate_key = throughputs.rate_key if isinstance(throughputs, KeyedThroughputs) else None
        self._rate_index: dict[tuple[Hashable, frozenset[str] | None], int] = {}
        self._rate_table = np.zeros((0, len(self.models)))

    # ---- main loop -------------------------------------------------------------------

    def run(self) -> SimResult:
        started = time.perf_counter()
        decider = self.decider
        now = self._next.arrival_s if self._next is not None else 0.0
        forced_at = float("nan")
        while True:
            self._admit(now)
            if self._finished():
                break
            plan = decider.plan(now)
            if self.on_plan is not None:
                self.on_plan(plan)
            self._sample(now, plan.jobs_running)
            if len(plan):
                now = self._run_round(plan)
                continue
            arriving = self._next is not None
            if force_solve_due(decider, plan, now, waiting=arriving, forced_at=forced_at):
                forced_at = now  # Gavel forces a solve when the cluster would sit idle
                decider.solve(now)
            elif self._next is not None:
                now = self._next.arrival_s  # nothing can run: skip to the next arrival
            else:
                break  # nothing can ever run (e.g. no throughput): the jobs stay queued
        decider.release_all()
        book, leases = decider.book, decider.leases
        fallbacks = decider.fallbacks()
        if self.speed is not None:
            fallbacks += self.speed.fallbacks()
        stats = RunStats(
            events=self.arrivals + book.solves + self.completions,
            rounds=self.rounds,
            policy_solves=book.solves,
            policy_solve_s=book.solve_s,
            policy_fallbacks=sum(count for _, count in book.fallbacks.counts),
            elapsed_s=time.perf_counter() - started,
        )
        counts = leases.counts()
        lease_counts = LeaseCounts(
            extensions=counts.extensions,
            opportunities=counts.opportunities,
            placement_failures=counts.failures,
            placement_s=leases.seconds,
            fast_placements=leases.fast_placements,
        )
        return SimResult(
            records=job_records(self.jobs, decider.type_names),
            timeline=self.timeline.freeze(),
            stats=stats,
            total_gpu_milli=decider.state.total_gpu_milli,
            end_s=now,
            fallbacks=fallbacks,
            leases=lease_counts,
            estimation=None if decider.estimation is None else decider.estimation.report(),
        )

    def _finished(self) -> bool:
        if self.workload.measure is not None:
            return self.measured_left <= 0
        return self._next is None and not self.decider.has_active_jobs

    # ---- arrivals --------------------------------------------------------------------

    def _admit(self, now: float) -> None:
        """Admit every job that arrived by ``now``, as one batch."""
        job = self._next
        if job is None or job.arrival_s > now:
            return
        batch: list[JobSpec] = []
        stream = self._stream
        while job is not None and job.arrival_s <= now:
            batch.append(job)
            job = next(stream, None)
        self._next = job
        if self.speed is not None:
            batch = [self.speed.admit(j) for j in batch]
        self.arrivals += len(batch)
        window = self.workload.measure
        if window is None:
            measured = [True] * len(batch)
        else:
            start, end = window
            measured = [start <= j.id < end for j in batch]
        jobs = self.jobs
        rejected = len(jobs.rejected)
        rates = self._rate(batch)
        if self._true_rates is not None:
            rates = self._hide(rates)
        rows = self.decider.admit_many(batch, rates, measured)
        if len(jobs.rejected) > rejected:
            for row, m in zip(rows.tolist(), measured, strict=True):
                if row in jobs.rejected:
                    self._count_done(m)

    def _hide(self, rates: np.ndarray) -> np.ndarray:
        """Keep the batch's true rates (rows in arrival order) and give the decider NaN
        (unknown) for each; 0 stays 0 (a model the job may not use)."""
        true = self._true_rates
        assert true is not None
        first, n = len(self.jobs), len(rates)
        if first + n > len(true):
            grown = np.zeros((max(2 * len(true), first + n), true.shape[1]))
            grown[: len(true)] = true
            true = self._true_rates = grown
        true[first : first + n] = rates
        return np.where(rates > 0, np.nan, 0.0)

    def _rate(self, batch: list[JobSpec]) -> np.ndarray:
        """(len(batch), models) isolated steps/s; 0 where a job may not use the model or
        the throughputs lack it. Looked up once per rate key and allowed models
        (``KeyedThroughputs``), not once per job and model."""
        rate_key = self._rate_key
        if rate_key is None:
            return np.array([self._job_rates(job) for job in batch]).reshape(len(batch), -1)
        index = self._rate_index
        at: list[int] = []
        for job in batch:
            key = (rate_key(job), job.allowed_models)
            k = index.get(key)
            if k is None:
                k = index[key] = len(index)
                self._rate_table = np.vstack([self._rate_table, self._job_rates(job)])
            at.append(k)
        return self._rate_table[at]

    def _job_rates(self, job: JobSpec) -> list[float]:
        return [self._model_rate(job, m) for m in self.models]

    def _model_rate(self, job: JobSpec, model: GpuModel) -> float:
        if not job.allows(model.name):
            return 0.0
        try:
            return float(self.workload.throughputs.rate(job, model))
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

    # ---- one round: the progress model -----------------------------------------------

    def _run_round(self, plan: RoundPlan) -> float:
        """Run ``plan`` at the modelled rates; tell the decider; return the round's end."""
        now = plan.now_s
        jobs = self.jobs
        rate_a, steps_a = plan.rate_a, plan.steps_a
        true = self._true_rates
        if true is not None:  # jobs run at their true rates, not the decider's estimates
            from gpumosaic.mechanisms.rounds.round_kernel import grant_steps

            rate_a = true[plan.rows_a, plan.type_index]
            r = self.config.round_s
            steps_a = grant_steps(rate_a, plan.rows_a, jobs.total_steps, jobs.done_steps, r)
        if self.speed is not None:
            from gpumosaic.mechanisms.rounds.round_kernel import grant_steps

            decider, r, rows_a = self.decider, self.config.round_s, plan.rows_a
            rate_a = shared_rates(
                self.speed, decider.leases, decider.state, jobs, rows_a, plan.rows_b, rate_a, r
            )
            steps_a = grant_steps(rate_a, rows_a, jobs.total_steps, jobs.done_steps, r)
        latency = self.launch_latency_s
        new = ~plan.extended if latency > 0 else None
        if new is not None:  # a new process has round_s - latency to step
            room = max(self.config.round_s - latency, 0.0)
            steps_a = np.where(new, np.minimum(steps_a, np.floor(rate_a * room)), steps_a)
        steps_b = plan.steps_b
        if new is not None and plan.has_pairs:
            steps_b = np.where(new, np.minimum(steps_b, np.floor(plan.rate_b * room)), steps_b)
        n = len(plan)
        finish_a = np.empty(n)
        ran_s = np.empty(n)
        # A single job's finish_b is never read: without pairs it is finish_a.
        finish_b = np.empty(n) if plan.has_pairs else finish_a
        end = round_kernel().finish_times(
            now, plan.rows_b, steps_a, rate_a, steps_b, plan.rate_b, plan.has_pairs,
            finish_a, finish_b, ran_s,
        )  # fmt: skip
        if new is not None and new.any():
            finish_a[new] += latency
            if plan.has_pairs:
                finish_b[new & (plan.rows_b >= 0)] += latency
            end = max(end, float(finish_a.max()), float(finish_b.max()) if n else end)
        if end <= now:  # only zero-step jobs (cannot happen with positive rates)
            end = now + self.config.round_s
        report = RoundReport(end, ran_s, steps_a, steps_b, finish_a, finish_b)
        finished = self.decider.report(plan, report)
        if true is not None:  # what the round measured: each single job's rate
            ran = np.flatnonzero((plan.rows_b < 0) & (steps_a > 0))
            observe = self.decider.observe_rate
            for row, t, rate in zip(
                plan.rows_a[ran].tolist(),
                plan.type_index[ran].tolist(),
                rate_a[ran].tolist(),
                strict=True,
            ):
                observe(row, t, rate)
        for row, _ in finished:
            self.completions += 1
            self._count_done(jobs.measured[row])
        self.rounds += 1
        return float(end)

    def _sample(self, now: float, running: int) -> None:
        tracker = self.tracker
        tracker.refresh()
        allocated, fragmentation, gpu_w, cpu_w = tracker.figures()
        self.timeline.record(
            now, allocated, running, self.jobs.n_active - running, fragmentation, gpu_w, cpu_w
        )


def job_records(jobs: JobStore, type_names: tuple[str, ...]) -> tuple[JobRecord, ...]:
    """One record per job the decider saw, with its final status (columns computed over
    arrays, then one record per row)."""
    n = len(jobs)
    start = jobs.start_s[:n]
    finish = jobs.finish_s[:n]
    first = jobs.first_type[:n]
    ran = first >= 0
    rate = np.where(ran, jobs.rates[np.arange(n), np.maximum(first, 0)], 0.0)
    work = np.fromiter((spec.work for spec in jobs.specs), np.float64, n)
    with np.errstate(divide="ignore", invalid="ignore"):
        alone = np.where(ran & (rate > 0), work / np.where(rate > 0, rate, 1.0), np.nan)
    status = np.where(
        ~np.isnan(finish),
        _COMPLETED,
        np.where(~np.isnan(start), _RUNNING, _QUEUED),
    )
    rejected = jobs.rejected
    for row in rejected:
        status[row] = _REJECTED
    for row, outcome in jobs.withdrawn.items():  # live only: failed, cancelled
        status[row] = _WITHDRAWN[outcome]
    statuses = [_STATUS[s] for s in status.tolist()]
    names = (*type_names, "")  # first_type -1 -> ""
    return tuple(
        JobRecord(
            job_id=spec.id,
            name=spec.name,
            job_type=spec.job_type,
            arrival_s=spec.arrival_s,
            start_s=start_s,
            finish_s=finish_s,
            num_gpu=spec.num_gpu,
            gpu_milli=spec.gpu_milli,
            status=status_,
            reason=str(rejection) if (rejection := rejected.get(row)) else "",
            rejection=rejection.reason if rejection else None,
            gpu_model=names[t],
            measured=measured,
            gpu_milli_seconds=milli_s,
            alone_s=alone_s,
        )
        for row, (spec, start_s, finish_s, status_, t, measured, milli_s, alone_s) in enumerate(
            zip(
                jobs.specs,
                start.tolist(),
                finish.tolist(),
                statuses,
                first.tolist(),
                jobs.measured,
                jobs.milli_s[:n].tolist(),
                alone.tolist(),
                strict=True,
            )
        )
    )


_COMPLETED, _RUNNING, _QUEUED, _REJECTED, _FAILED, _CANCELLED = range(6)
_WITHDRAWN = {Outcome.FAILED: _FAILED, Outcome.CANCELLED: _CANCELLED}
_STATUS = (
    JobStatus.COMPLETED,
    JobStatus.RUNNING,
    JobStatus.QUEUED,
    JobStatus.REJECTED,
    JobStatus.FAILED,
    JobStatus.CANCELLED,
)
