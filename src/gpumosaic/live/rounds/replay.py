"""A workload replayed on a live round service as emulated jobs: each job is submitted at
its arrival time (job time, under the service's time scale) as
``python -m gpumosaic.live.emulate --job-type TYPE`` with the job's steps, shape, models
and weight; the service runs it on Ray like any job. The caller (``sim-vs-live``) builds
the service's config and compares what this returns with the simulator.

Jobs arriving at time 0 are in the store before the service's first round (as the
simulator admits them in one batch); later ones are submitted by this thread when the
service's clock reaches their arrival. The jobs' JCTs are read from the service's own
decider, in job time, and returned as the simulator's records (``job_records``), so both
sides are summarised by the same code.
"""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpumosaic.live.rounds.cluster import LiveCluster
from gpumosaic.live.rounds.service import Service, ServiceConfig
from gpumosaic.live.rounds.submission import JobSubmission
from gpumosaic.mechanisms.rounds.decision import RoundPlan
from gpumosaic.model.job import JobSpec
from gpumosaic.sim.result import JobRecord, RunStats, SimResult, TimelineRecorder
from gpumosaic.sim.rounds.driver import job_records


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


def emulate_command(job_type: str, python: str = sys.executable) -> str:
    return f"{shlex.quote(python)} -m gpumosaic.live.emulate --job-type {shlex.quote(job_type)}"


def submission(
    job: JobSpec, checkpoint_every_s: float, python: str = sys.executable
) -> JobSubmission:
    """``checkpoint_every_s``: the job's save cadence (job time; it also saves at every
    extension), given to it as ``GPUMOSAIC_CHECKPOINT_EVERY_S``."""
    return JobSubmission(
        command=emulate_command(job.job_type, python),
        steps=float(job.work),
        gpus=max(job.num_gpu, 1),
        gpu_milli=job.gpu_milli,
        gpu_models=sorted(job.allowed_models) if job.allowed_models else [],
        priority_weight=job.priority_weight,
        name=job.name or f"w{job.id}",
        job_type=job.job_type,
        env={"GPUMOSAIC_CHECKPOINT_EVERY_S": repr(float(checkpoint_every_s))},
    )


def replay(
    jobs: Sequence[JobSpec],
    config: ServiceConfig,
    cluster: LiveCluster,
    *,
    wall_limit_s: float,
    progress: Callable[[int, int], None] | None = None,
) -> LiveReplay:
    """Run ``jobs`` (in arrival order) on a service built from ``config``; stop it once
    every job is final or after ``wall_limit_s``."""
    plans: list[RoundPlan] = []
    service = Service(config, cluster, on_plan=plans.append)
    store, clock = service.store, service.clock
    ordered = sorted(jobs, key=lambda j: (j.arrival_s, j.id))
    id_of: dict[int, int] = {}
    # Saves every half round: under a time scale of hundreds, the default minute of job
    # time would be several fsyncs a second per job on a 2-core machine.
    cadence = max(config.round_s / 2, 60.0)
    first = 0
    while first < len(ordered) and ordered[first].arrival_s <= 0:
        job = ordered[first]
        id_of[store.add_job(submission(job, cadence), clock(), config.max_retries)] = job.id
        first += 1
    started = time.monotonic()
    service.start()
    finished = False
    try:
        driver = service.driver
        assert driver is not None
        give_up = started + wall_limit_s
        nxt = first
        while time.monotonic() < give_up:
            if service.driver_error is not None:
                raise service.driver_error
            now = clock() - driver.epoch
            while nxt < len(ordered) and ordered[nxt].arrival_s <= now:
                job = ordered[nxt]
                id_of[store.add_job(submission(job, cadence), clock(), config.max_retries)] = job.id
                nxt += 1
            done = sum(1 for j in store.jobs() if j.terminal)
            if progress is not None:
                progress(done, len(ordered))
            if nxt == len(ordered) and done == len(ordered):
                finished = True
                break
            wait = 0.2
            if nxt < len(ordered):
                due = (ordered[nxt].arrival_s - now) / config.time_scale
                wait = min(wait, max(due, 0.0))
            time.sleep(wait)
    finally:
        service.stop()
    wall = time.monotonic() - started
    driver = service.driver
    assert driver is not None
    decider = service.decider
    records = tuple(
        _as_workload_job(r, id_of) for r in job_records(decider.jobs, decider.type_names)
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
        launches=c.launches,
        extensions=c.extensions,
    )


def _as_workload_job(record: JobRecord, id_of: dict[int, int]) -> JobRecord:
    from dataclasses import replace

    return replace(record, job_id=id_of.get(record.job_id, record.job_id))
