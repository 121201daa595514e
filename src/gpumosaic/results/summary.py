"""The run summary: the numbers people compare runs by, as a frozen value."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from gpumosaic.results.columns import JobColumns
from gpumosaic.results.fairness import fairness_of
from gpumosaic.results.result import JobRecord, JobStatus, SimResult, Timeline

# The value is plain Python (a study file's metric names are checked with it, no numpy).
from gpumosaic.results.summary_value import Summary as Summary

JOULES_PER_KWH = 3.6e6


def jct_values(records: tuple[JobRecord, ...]) -> npt.NDArray[np.float64]:
    """JCTs of measured, completed jobs."""
    return np.array(
        [r.jct_s for r in records if r.measured and r.status is JobStatus.COMPLETED],
        dtype=np.float64,
    )


def completed_job_ids(records: tuple[JobRecord, ...]) -> npt.NDArray[np.int64]:
    """Ids of measured, completed jobs, in the order of ``jct_values``."""
    return np.array(
        [r.job_id for r in records if r.measured and r.status is JobStatus.COMPLETED],
        dtype=np.int64,
    )


def makespan_s(jobs: JobColumns) -> float:
    """The one makespan (docs/metrics.md): the last completion minus the first arrival,
    over every job that arrived (measured or not); NaN if none completed."""
    if not jobs.completed.any():
        return math.nan
    return float(jobs.finish_s[jobs.completed].max() - jobs.arrival_s.min())


def time_average(timeline: Timeline, values: npt.NDArray[np.float64], end_s: float) -> float:
    """Average of a piecewise-constant series over [first sample, end_s], skipping NaN."""
    t = timeline.time_s
    if len(t) == 0 or end_s <= t[0]:
        return math.nan
    widths = np.diff(np.append(t, max(end_s, t[-1])))
    ok = ~np.isnan(values) & (widths > 0)
    if not ok.any():
        return math.nan
    return float((values[ok] * widths[ok]).sum() / widths[ok].sum())


def integral(timeline: Timeline, values: npt.NDArray[np.float64], end_s: float) -> float:
    t = timeline.time_s
    if len(t) == 0:
        return 0.0
    widths = np.diff(np.append(t, max(end_s, t[-1])))
    return float((np.nan_to_num(values) * widths).sum())


def summarize(result: SimResult) -> Summary:
    records = result.records
    jobs = JobColumns.of(records)
    all_jct = jobs.jct_s
    jcts = all_jct[jobs.measured & jobs.completed]
    count = jobs.status_counts
    measured = jobs.measured
    started = measured & ~np.isnan(jobs.start_s)
    queueing = (jobs.start_s - jobs.arrival_s)[started]
    span = makespan_s(jobs)
    timeline = result.timeline
    start = float(timeline.time_s[0]) if len(timeline.time_s) else 0.0
    end = start + span if not math.isnan(span) else result.end_s
    alloc_integral = integral(timeline, timeline.allocated_milli, end)
    capacity = result.total_gpu_milli * (end - start)
    power = timeline.power_gpu_w + timeline.power_cpu_w
    keep = jobs.slowdown_jobs
    slowdowns = all_jct[keep] / jobs.alone_s[keep]

    fair = fairness_of(jobs, result.total_gpu_milli, result.end_s)

    def pct(q: float) -> float:
        return float(np.percentile(jcts, q)) if len(jcts) else math.nan

    return Summary(
        jobs=len(records),
        completed=count[JobStatus.COMPLETED],
        running=count[JobStatus.RUNNING],
        queued=count[JobStatus.QUEUED],
        rejected=count[JobStatus.REJECTED],
        failed=count[JobStatus.FAILED],
        cancelled=count[JobStatus.CANCELLED],
        unfinished=count[JobStatus.RUNNING] + count[JobStatus.QUEUED],
        never_started=jobs.never_started,
        measured_jobs=int(measured.sum()),
        avg_jct_s=float(jcts.mean()) if len(jcts) else math.nan,
        p50_jct_s=pct(50),
        p95_jct_s=pct(95),
        p99_jct_s=pct(99),
        avg_queueing_s=float(np.mean(queueing)) if len(queueing) else math.nan,
        makespan_s=span,
        utilization=alloc_integral / capacity if capacity > 0 else math.nan,
        fragmentation_rate_mean=time_average(timeline, timeline.fragmentation_rate, end),
        energy_kwh=integral(timeline, power, end) / JOULES_PER_KWH,
        avg_slowdown=float(np.mean(slowdowns)) if len(slowdowns) else math.nan,
        slowdown_p99=fair.slowdown_p99,
        slowdown_max=fair.slowdown_max,
        ftf_rho_mean=fair.ftf_rho_mean,
        ftf_rho_max=fair.ftf_rho_max,
        jain_index=fair.jain_index,
        suspended_s=jobs.suspended_s,
        thrashing_s=jobs.thrashing_s,
        handovers=jobs.handovers,
        migrations=jobs.migrations,
        rounds=result.stats.rounds,
        policy_solves=result.stats.policy_solves,
        policy_solve_s=result.stats.policy_solve_s,
        events=result.stats.events,
        elapsed_s=result.stats.elapsed_s,
        fallbacks=result.fallbacks,
    )
