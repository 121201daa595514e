"""Turn a finished Gandiva run into the common SimResult shape."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from gpumosaic.fallbacks import Fallbacks
from gpumosaic.mechanisms.gandiva.counters import GandivaCounters
from gpumosaic.mechanisms.gandiva.group import GandivaJob
from gpumosaic.mechanisms.gandiva.sim.progress import JobProgress, Ledger
from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.results.outcome import Rejection
from gpumosaic.results.result import (
    GandivaReport,
    GandivaWindow,
    JobRecord,
    JobStatus,
    RunStats,
    SimResult,
    Timeline,
)

# (time, ledger then, held GPU-seconds then) at each end of a measurement window.
Snapshot = tuple[float, Ledger, float]


def build_result(
    *,
    jobs: Mapping[int, GandivaJob],
    progress: Mapping[int, JobProgress],
    queued: Iterable[GandivaJob],
    rejected: Mapping[int, Rejection],
    is_measured: Callable[[int], bool],
    counters: GandivaCounters,
    ledger: Ledger,
    held_gpu_s: float,
    snapshots: Sequence[Snapshot],
    timeline: Timeline,
    total_gpu_milli: int,
    end_s: float,
    stats: RunStats,
    fallbacks: Fallbacks,
) -> SimResult:
    queued_ids = {j.id for j in queued}
    records = tuple(
        _record(
            job,
            progress[job_id],
            end_s,
            rejected.get(job_id),
            job_id in queued_ids,
            is_measured(job_id),
        )
        for job_id, job in jobs.items()
    )
    suspended = sum(r.suspended_s for r in records)
    window = None
    if len(snapshots) == 2:
        (t0, l0, held0), (t1, l1, held1) = snapshots
        window = GandivaWindow(
            start_s=t0,
            end_s=t1,
            busy_gpu_s=l1.busy_gpu_s - l0.busy_gpu_s,
            overhead_gpu_s=l1.overhead_gpu_s - l0.overhead_gpu_s,
            effective_gpu_s=l1.effective_gpu_s - l0.effective_gpu_s,
            held_gpu_s=held1 - held0,
        )
    report = GandivaReport(
        handovers=sum(r.handovers for r in records),
        migrations=counters.migrations,
        defragmentations=counters.defragmentations,
        spread_moves=counters.spread_moves,
        packs_tried=counters.packs_tried,
        packs_kept=counters.packs_kept,
        packs_undone=counters.packs_undone,
        suspended_s=suspended,
        busy_gpu_s=ledger.busy_gpu_s,
        overhead_gpu_s=ledger.overhead_gpu_s,
        held_gpu_s=held_gpu_s,
        effective_gpu_s=ledger.effective_gpu_s,
        max_progress_residual=ledger.max_residual,
        max_memory_pressure=ledger.max_memory_pressure,
        window=window,
    )
    return SimResult(
        records=records,
        timeline=timeline,
        stats=stats,
        total_gpu_milli=total_gpu_milli,
        end_s=end_s,
        fallbacks=fallbacks,
        gandiva=report,
    )


def _record(
    job: GandivaJob,
    run: JobProgress,
    end: float,
    rejected: Rejection | None,
    queued: bool,
    measured: bool,
) -> JobRecord:
    spec = run.spec
    if rejected is not None:
        status, reason = JobStatus.REJECTED, str(rejected)
    elif run.finished:
        status, reason = JobStatus.COMPLETED, ""
    elif queued:
        status, reason = JobStatus.QUEUED, "no free or shareable GPU set (gandiva)"
    else:
        status, reason = JobStatus.RUNNING, ""
    started = run.started
    stop = run.finish_s if run.finished else end
    # Placed but not holding the GPUs: time-sliced out, hand-overs, migrations, queued again.
    suspended = max(0.0, stop - run.start_s - run.running_s) if started else 0.0
    return JobRecord(
        job_id=spec.id,
        name=spec.name,
        job_type=spec.job_type,
        arrival_s=spec.arrival_s,
        start_s=run.start_s,
        finish_s=run.finish_s,
        num_gpu=spec.num_gpu,
        gpu_milli=MILLI_PER_GPU if spec.num_gpu else 0,
        status=status,
        reason=reason,
        rejection=None if rejected is None else rejected.reason,
        gpu_model=run.first_model,
        measured=measured,
        gpu_milli_seconds=run.gpu_milli_s,
        alone_s=run.alone_s,
        suspended_s=suspended,
        migrations=job.migrations,
        handovers=job.handovers,
    )
