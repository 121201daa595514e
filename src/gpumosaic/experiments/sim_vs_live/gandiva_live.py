"""The live side of ``sim-vs-live --mechanism gandiva``: the workload submitted to a local
``serve --mechanism gandiva`` service as Gandiva's emulated jobs
(``mechanisms/gandiva/live/emulate.py``) at their arrival times, run until every job is
final or the wall limit, and read back as the simulator's records (job time, the
workload's ids) with the hand-over costs and action counts the live driver measured."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpumosaic.errors import InputError
from gpumosaic.experiments.sim_vs_live.counts import ActionCounts
from gpumosaic.mechanisms.gandiva import GandivaConfig
from gpumosaic.model.job import JobSpec
from gpumosaic.results.result import JobStatus, RunStats, SimResult, TimelineRecorder
from gpumosaic.run.description import RunDescription
from gpumosaic.runtime.jobs.submission import JobSubmission

if TYPE_CHECKING:
    from gpumosaic.mechanisms.gandiva.live.driver import GandivaDriver, HandOverTimes
    from gpumosaic.runtime.cluster import LiveCluster

GRACE_S = 5.0  # SIGTERM -> SIGKILL for a job told to stop (it checkpoints first)


def live_mechanism(config: GandivaConfig) -> str:
    """``serve --mechanism`` for a config: every field spelled out."""
    from dataclasses import fields

    parts = []
    for f in fields(config):
        value = getattr(config, f.name)
        parts.append(f"{f.name}={'on' if value is True else 'off' if value is False else value}")
    return "gandiva:" + ",".join(parts)


@dataclass(frozen=True, slots=True)
class LiveGandiva:
    result: SimResult  # records keyed by the workload's job ids, times in job time
    times: HandOverTimes
    counts: ActionCounts
    wall_s: float
    finished: bool
    launches: int


def check_gavel_types(jobs: Sequence[JobSpec]) -> None:
    """Gandiva's emulated jobs step at Gavel's table rates, alone and packed (the pair
    rates the simulator's Gandiva reads): a job without a Gavel type has no pair rate, so
    ``--mechanism gandiva`` takes Gavel workloads and job lists with ``job_type`` only."""
    from gpumosaic.workloads.throughputs import GavelThroughputTable

    table = GavelThroughputTable.load()
    for job in jobs:
        scale = max(job.num_gpu, 1)
        if not any(table.has(job.job_type, scale, column) for column in table.gpu_types):
            raise InputError(
                f"job {job.id} ({job.job_type!r} on {scale} GPU(s)) has no rate in Gavel's "
                "table, so Gandiva cannot emulate it live (its pair rates are Gavel's): use "
                "a Gavel workload or a job list with job_type and steps",
                field="--workload",
            )


def _submission(job: JobSpec, checkpoint_every_s: float) -> JobSubmission:
    """The job as Gandiva's emulated job (``mechanisms/gandiva/live/emulate.py``); its save cadence
    (job time) as ``GPUMOSAIC_CHECKPOINT_EVERY_S``."""
    return JobSubmission(
        command=emulate_command(job.job_type),
        steps=float(job.work),
        gpus=max(job.num_gpu, 1),
        gpu_milli=job.gpu_milli,
        gpu_models=sorted(job.allowed_models) if job.allowed_models else [],
        priority_weight=job.priority_weight,
        name=job.name or f"w{job.id}",
        job_type=job.job_type,
        env={"GPUMOSAIC_CHECKPOINT_EVERY_S": repr(float(checkpoint_every_s))},
    )


def emulate_command(job_type: str, python: str = sys.executable) -> str:
    import shlex

    return (
        f"{shlex.quote(python)} -m gpumosaic.mechanisms.gandiva.live.emulate "
        f"--job-type {shlex.quote(job_type)}"
    )


def run_live(
    description: RunDescription,
    config: GandivaConfig,
    counts: Sequence[tuple[str, int]],
    cluster: LiveCluster,
    jobs: Sequence[JobSpec],
    scale: float,
    limit_s: float,
    root: Path,
    say: Callable[[str], None],
) -> LiveGandiva:
    from gpumosaic.experiments.sim_vs_live.replay import Arrivals
    from gpumosaic.run.serve import ServeDescription, Service

    service_config = ServeDescription(
        state=str(root / "state.db"),
        port=0,
        cluster=",".join(f"{m}:{c}" for m, c in counts),
        seed=description.seed,
        time_scale=scale,
        grace_s=GRACE_S,
        warm_launchers=True,
        mechanism=live_mechanism(config),
        policy=description.policy,
        placement=description.placement,  # None: Gandiva's own affinity order
    )
    service = Service(service_config, cluster)
    store, clock = service.store, service.clock
    cadence = config.quantum_s  # a stop saves anyway; this bounds a lost process's redo
    arrivals = Arrivals(
        jobs,
        lambda job: store.add_job(_submission(job, cadence), clock(), service_config.max_retries),
    )
    arrivals.submit_due(0.0)  # before the service starts, as the simulator admits them
    ordered, id_of = arrivals.ordered, arrivals.ids
    started = time.monotonic()
    service.start()
    finished = False
    last = -1
    try:
        driver = service.gandiva_driver
        assert driver is not None
        give_up = started + limit_s
        while time.monotonic() < give_up:
            if service.driver_error is not None:
                raise service.driver_error
            now = clock() - driver.epoch
            arrivals.submit_due(now)
            done = sum(1 for j in store.jobs() if j.terminal)
            if done != last:
                last = done
                took = time.monotonic() - started
                say(f"live: {done}/{len(ordered)} jobs final after {took:.0f} s")
            if arrivals.all_in and done == len(ordered):
                finished = True
                break
            time.sleep(arrivals.wait_s(now, scale))
    finally:
        rows = store.jobs()  # the store closes with the service
        service.stop()
    wall = time.monotonic() - started
    assert driver is not None
    return LiveGandiva(
        result=_live_result(rows, driver, id_of, ordered, wall),
        times=driver.times,
        counts=ActionCounts(
            driver.counters.suspensions, driver.counters.migrations, driver.counters.packs
        ),
        wall_s=wall,
        finished=finished,
        launches=driver.supervisor.counters.launches,
    )


def _live_result(
    rows: Sequence[object],
    driver: GandivaDriver,
    id_of: dict[int, int],
    jobs: Sequence[JobSpec],
    wall_s: float,
) -> SimResult:
    """The store's rows as the simulator's records (job time, the workload's ids): a
    job's times run from its arrival in the decider (its submission, or the service's
    start for one submitted before it). Each keeps its typed end (``JobRow.end``):
    failed, cancelled and rejected (with its reason) as they ended."""
    from dataclasses import replace

    from gpumosaic.runtime.state.live_result import job_record
    from gpumosaic.runtime.state.records import JobRow

    spec_of = {j.id: j for j in jobs}
    records = []
    for row in rows:
        assert isinstance(row, JobRow)
        spec = spec_of[id_of[row.id]]
        # job time since the decider's arrival, from the workload's arrival
        shift = spec.arrival_s - max(row.submitted_at - driver.epoch, 0.0) - driver.epoch
        record = job_record(row, epoch=-shift)
        records.append(
            replace(
                record,
                job_id=spec.id,
                name=spec.name,
                job_type=spec.job_type,
                arrival_s=spec.arrival_s,
            )
        )
    records.sort(key=lambda r: r.job_id)
    end = max((r.finish_s for r in records if r.status is JobStatus.COMPLETED), default=0.0)
    total_milli = int(driver.decider.state.total_gpu_milli)
    return SimResult(
        records=tuple(records),
        timeline=TimelineRecorder().freeze(),  # no samples: live utilization is not read
        stats=RunStats(events=len(records), elapsed_s=wall_s),
        total_gpu_milli=total_milli,
        end_s=end,
        fallbacks=driver.decider.fallbacks,
    )
