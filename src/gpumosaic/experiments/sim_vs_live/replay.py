"""A workload replayed on a live round service as emulated jobs: each job is submitted at
its arrival time (job time, under the service's time scale) as
``python -m gpumosaic.runtime.emulate --rates MODEL=R,... [--job-type TYPE]`` with the job's
steps, shape, models and weight; the service runs it on Ray like any job. The caller
(``sim-vs-live``) builds the service's config and compares what this returns with the
simulator.

The rates are the simulator's, from one source: ``EmulatedJobs`` asks the workload's own
``throughputs.rate(job, model)`` (what the round simulator admits the job with) for each
GPU model of the live cluster and hands them to the job as ``--rates``. A Gavel job's are
its table rates (``--job-type`` still names it: the service's prior and label); an openb
task's or a ``duration_s`` job's are 1 step/s on every model (work = its duration), so
every workload ``simulate`` takes replays live. The same rates go into the submission's
``rates``, so the live decider admits the job with them as the simulator does (known,
not profiled). Another submitter (``JobSubmitter``) runs
other commands, e.g. real training jobs (bench/gpu_check_live.py).

Jobs arriving at time 0 are in the store before the service's first round (as the
simulator admits them in one batch); later ones are submitted by this thread when the
service's clock reaches their arrival. The jobs' JCTs are read from the service's own
decider, in job time, and returned as the simulator's records (``job_records``), so both
sides are summarised by the same code.
"""

from __future__ import annotations

import math
import shlex
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from gpumosaic.mechanisms.rounds.decision import RoundPlan
from gpumosaic.mechanisms.rounds.live.driver import RoundDriver
from gpumosaic.mechanisms.rounds.sim.driver import job_records
from gpumosaic.model.gpu import GpuModel
from gpumosaic.model.job import JobSpec
from gpumosaic.results.result import JobRecord, RunStats, SimResult, TimelineRecorder
from gpumosaic.run.serve import ServeDescription, Service
from gpumosaic.runtime.cluster import LiveCluster
from gpumosaic.runtime.jobs.submission import JobSubmission
from gpumosaic.workloads.throughputs import GavelThroughputTable, Throughputs


@dataclass(frozen=True, slots=True)
class LiveReplay:
    result: SimResult  # records keyed by the workload's job ids, times in job time
    plans: tuple[RoundPlan, ...]  # every round's plan, live job ids (see ``id_of``)
    id_of: dict[int, int]  # live job id -> workload job id
    launch_latency_s: tuple[float, ...]  # job time, per new lease
    wall_s: float
    finished: bool  # every job reached a final state before the wall limit
    launches: int
    extensions: int


def emulate_command(
    job_type: str, python: str = sys.executable, rates: Mapping[str, float] | None = None
) -> str:
    """The emulated job's command line: Gavel's table rate for ``job_type``, or the
    ``rates`` given (GPU model -> steps/s, every digit)."""
    parts = [shlex.quote(python), "-m", "gpumosaic.runtime.emulate"]
    if job_type:
        parts += ["--job-type", shlex.quote(job_type)]
    if rates is not None:
        parts += ["--rates", ",".join(f"{m}={r!r}" for m, r in rates.items())]
    return " ".join(parts)


class JobSubmitter(Protocol):
    """How a workload job becomes a live submission (``checkpoint_every_s``: the job's
    save cadence in job time, given as ``GPUMOSAIC_CHECKPOINT_EVERY_S``)."""

    def submission(self, job: JobSpec, checkpoint_every_s: float) -> JobSubmission: ...


@dataclass(frozen=True, slots=True)
class EmulatedJobs:
    """Jobs as emulated jobs stepping at the simulator's rates (module doc)."""

    throughputs: Throughputs  # the simulator's: the workload's own
    models: tuple[GpuModel, ...]  # the live cluster's GPU models
    python: str = sys.executable
    gavel_types: frozenset[str] = field(
        default_factory=lambda: frozenset(GavelThroughputTable.load().job_types)
    )

    def rates(self, job: JobSpec) -> dict[str, float]:
        """Steps/s (job time) of ``job`` on each model, as the simulator admits it; a
        model it has no positive rate on is left out (the simulator never runs it there)."""
        out: dict[str, float] = {}
        for gpu in self.models:
            if not job.allows(gpu.name):
                continue
            try:
                rate = float(self.throughputs.rate(job, gpu))
            except KeyError:
                continue
            if 0 < rate < math.inf:
                out[gpu.name] = rate
        return out

    def submission(self, job: JobSpec, checkpoint_every_s: float) -> JobSubmission:
        job_type = job.job_type if job.job_type in self.gavel_types else ""
        rates = self.rates(job)
        models = sorted(job.allowed_models) if job.allowed_models else []
        if rates and any(job.allows(g.name) and g.name not in rates for g in self.models):
            # A model the simulator has no rate on is one it never runs the job on;
            # live, a model without a known rate would be estimated and profiled.
            models = sorted(rates)
        return JobSubmission(
            command=emulate_command(job_type, self.python, rates),
            steps=float(job.work),
            gpus=max(job.num_gpu, 1),
            gpu_milli=job.gpu_milli,
            gpu_models=models,
            priority_weight=job.priority_weight,
            name=job.name or f"w{job.id}",
            job_type=job_type,
            rates=rates,  # the decider's prior: the rates the simulator admits it with
            env={"GPUMOSAIC_CHECKPOINT_EVERY_S": repr(float(checkpoint_every_s))},
        )


class Arrivals:
    """A workload's jobs handed to ``submit`` at their arrival times on a service's job
    clock (seconds since its driver's epoch), in arrival order; ``submit`` returns the
    id the service gave the job (``ids`` maps it back to the workload's)."""

    POLL_S = 0.2  # wall seconds between two looks at the service when no arrival is due

    def __init__(self, jobs: Sequence[JobSpec], submit: Callable[[JobSpec], int]) -> None:
        self.ordered = sorted(jobs, key=lambda j: (j.arrival_s, j.id))
        self._submit = submit
        self._next = 0
        self.ids: dict[int, int] = {}

    def submit_due(self, now: float) -> None:
        """Submit every job that has arrived by ``now`` (job time) and is not yet in."""
        ordered = self.ordered
        while self._next < len(ordered) and ordered[self._next].arrival_s <= now:
            job = ordered[self._next]
            self.ids[self._submit(job)] = job.id
            self._next += 1

    @property
    def all_in(self) -> bool:
        return self._next == len(self.ordered)

    def wait_s(self, now: float, time_scale: float) -> float:
        """Wall seconds to sleep: until the next arrival, at most ``POLL_S``."""
        if self.all_in:
            return self.POLL_S
        due = (self.ordered[self._next].arrival_s - now) / time_scale
        return min(self.POLL_S, max(due, 0.0))


def replay(
    jobs: Sequence[JobSpec],
    config: ServeDescription,
    cluster: LiveCluster,
    submitter: JobSubmitter,
    *,
    wall_limit_s: float,
    progress: Callable[[int, int], None] | None = None,
    measure: tuple[int, int] | None = None,
) -> LiveReplay:
    """Run ``jobs`` (in arrival order, each made a submission by ``submitter``) on a
    service built from ``config``; stop it once every job is final or after
    ``wall_limit_s``. ``measure`` (the workload's window, ids A..B-1): as the simulator
    does, jobs keep arriving until the window's jobs are final, and only those are
    measured (the others' records say ``measured=False``)."""
    plans: list[RoundPlan] = []
    service = Service(config, cluster, on_plan=plans.append)
    store, clock = service.store, service.clock
    lo, hi = measure if measure is not None else (-math.inf, math.inf)
    watched = {j.id for j in jobs if lo <= j.id < hi}
    # Saves every half round: under a time scale of hundreds, the default minute of job
    # time would be several fsyncs a second per job on a 2-core machine.
    cadence = max(config.round_s / 2, 60.0)
    arrivals = Arrivals(
        jobs,
        lambda job: store.add_job(submitter.submission(job, cadence), clock(), config.max_retries),
    )
    arrivals.submit_due(0.0)  # before the first round, as the simulator admits them
    id_of = arrivals.ids
    started = time.monotonic()
    service.start()
    finished = False
    try:
        driver = service.driver
        assert driver is not None
        give_up = started + wall_limit_s
        while time.monotonic() < give_up:
            if service.driver_error is not None:
                raise service.driver_error
            now = clock() - driver.epoch
            arrivals.submit_due(now)
            final = [j for j in store.jobs() if j.terminal and id_of.get(j.id) in watched]
            if progress is not None:
                progress(len(final), len(watched))
            if (
                len(final) == len(watched)
                and (measure is not None or arrivals.all_in)
                and all(_recorded(driver, j.id) for j in final if j.state == "done")
            ):
                finished = True
                break
            time.sleep(arrivals.wait_s(now, config.time_scale))
    finally:
        service.stop()
    wall = time.monotonic() - started
    driver = service.driver
    assert driver is not None
    decider = service.decider
    records = tuple(
        _as_workload_job(r, id_of, lo, hi) for r in job_records(decider.jobs, decider.type_names)
    )
    c = driver.counters
    book = decider.book
    stats = RunStats(
        events=len(records) + book.solves,
        rounds=sum(1 for p in plans if len(p)),
        policy_solves=book.solves,
        policy_solve_s=book.solve_s,
        elapsed_s=wall,
    )
    end = max((r.finish_s for r in records if r.finish_s == r.finish_s), default=0.0)
    result = SimResult(
        records=records,
        timeline=TimelineRecorder().freeze(),  # no samples: live utilization is not read
        stats=stats,
        total_gpu_milli=decider.state.total_gpu_milli,
        end_s=end,
        fallbacks=decider.fallbacks(),
    )
    return LiveReplay(
        result=result,
        plans=tuple(plans),
        id_of=id_of,
        launch_latency_s=tuple(c.launch_latency_s),
        wall_s=wall,
        finished=finished,
        launches=driver.process_counters.launches,
        extensions=c.extensions,
    )


def _recorded(driver: RoundDriver, job_id: int) -> bool:
    """Whether the decider has recorded the job's completion: the store marks a job
    done when its process reports its last step, the decider at the driver's next tick,
    and the records are the decider's (stopping in between lost the last job's JCT)."""
    row = driver.row_of.get(job_id)
    return row is None or not math.isnan(float(driver.decider.jobs.finish_s[row]))


def _as_workload_job(record: JobRecord, id_of: dict[int, int], lo: float, hi: float) -> JobRecord:
    from dataclasses import replace

    job_id = id_of.get(record.job_id, record.job_id)
    return replace(record, job_id=job_id, measured=lo <= job_id < hi)
