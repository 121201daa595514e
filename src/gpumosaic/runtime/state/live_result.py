"""A live service's store read as a run's result (``results.result.SimResult``), so a
live run is summarised by the same ``results.summary.summarize`` as a simulation.

Times are seconds since the first submission (a simulation's time 0 is its first
arrival). Each job's record has its typed end (``JobRow.end``); the timeline is the GPU
milli its leases held (each lease from its start to its end, or ``now`` while it is
active), with the jobs running and waiting at each change. What a live service does not
measure is left out, not guessed: no fragmentation samples (NaN) and no power (0 W);
``alone_s`` is unknown (NaN), so slowdown and fairness figures are NaN.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gpumosaic.results.outcome import Outcome
from gpumosaic.results.result import (
    JobRecord,
    RunStats,
    SimResult,
    Timeline,
    TimelineRecorder,
    status_of,
)
from gpumosaic.results.summary import Summary, summarize
from gpumosaic.runtime.state.records import JobRow, LeaseRow
from gpumosaic.runtime.state.store import Store


def job_record(row: JobRow, epoch: float) -> JobRecord:
    """One stored job as a record, its times in seconds since ``epoch``. A job that
    ended (completed, failed, cancelled) finishes when it ended; a rejected job never
    ran and has no finish, as in a simulation."""
    end = row.end
    ran = end.final and end.outcome is not Outcome.REJECTED

    def at(t: float | None) -> float:
        return math.nan if t is None else t - epoch

    return JobRecord(
        job_id=row.id,
        name=row.name,
        job_type=row.job_type,
        arrival_s=row.submitted_at - epoch,
        start_s=at(row.started_at),
        finish_s=at(row.finished_at) if ran else math.nan,
        num_gpu=row.num_gpu,
        gpu_milli=row.gpu_milli,
        status=status_of(end.outcome),
        reason=end.words,
        rejection=end.rejection,
        gpu_model=row.gpu_type,
    )


def lease_timeline(
    jobs: Sequence[JobRow], leases: Sequence[LeaseRow], epoch: float, now: float
) -> Timeline:
    """GPU milli held by leases, jobs running (holding a lease) and jobs waiting
    (submitted, not final, holding none), sampled at every change from the first
    submission on (piecewise constant, as a simulation's timeline)."""
    changes: list[tuple[float, int, int, int]] = []  # (t, milli, running, present)
    for job in jobs:
        changes.append((job.submitted_at - epoch, 0, 0, 1))
        if job.terminal:
            left = job.finished_at if job.finished_at is not None else job.submitted_at
            changes.append((left - epoch, 0, 0, -1))
    for lease in leases:
        milli = sum(len(gpus) * part_milli for _, gpus, part_milli in lease.parts)
        ended = lease.ended_at if lease.ended_at is not None else now
        changes.append((lease.started_at - epoch, milli, 1, 0))
        changes.append((ended - epoch, -milli, -1, 0))
    recorder = TimelineRecorder()
    held = running = present = 0
    for t, milli, ran, here in sorted(changes, key=lambda c: c[0]):
        held, running, present = held + milli, running + ran, present + here
        recorder.record(t, float(held), running, max(present - running, 0), math.nan, 0.0, 0.0)
    return recorder.freeze()


def live_result(
    jobs: Sequence[JobRow], leases: Sequence[LeaseRow], total_gpu_milli: int, now: float
) -> SimResult:
    """The service's jobs and leases as a run's result at wall time ``now``."""
    epoch = min((j.submitted_at for j in jobs), default=now)
    records = tuple(job_record(j, epoch) for j in jobs)
    return SimResult(
        records=records,
        timeline=lease_timeline(jobs, leases, epoch, now),
        stats=RunStats(events=len(records), elapsed_s=now - epoch),
        total_gpu_milli=total_gpu_milli,
        end_s=now - epoch,
    )


def store_summary(store: Store, total_gpu_milli: int, now: float) -> Summary:
    """A live service's summary (``GET /v1/summary``): its store as a run's result,
    summarised by the simulations' own ``summarize``."""
    return summarize(live_result(store.jobs(), store.leases(), total_gpu_milli, now))
