"""Turn a finished Gandiva run into the common SimResult shape."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.sim.gandiva.group import JobRun
from gpumosaic.sim.result import JobRecord, JobStatus, RunStats, SimResult

if TYPE_CHECKING:
    from gpumosaic.sim.gandiva.simulator import GandivaSimulator


def build_result(sim: GandivaSimulator, elapsed_s: float) -> SimResult:
    end = sim.engine.now
    queued = {r.spec.id for r in sim.queue}
    records = tuple(
        _record(
            run, end, sim.rejected.get(job_id), job_id in queued, sim.workload.is_measured(job_id)
        )
        for job_id, run in sim.runs.items()
    )
    ledger = sim.ledger
    suspended = sum(r.suspended_s for r in records)
    extra: tuple[tuple[str, float], ...] = (
        ("handovers", float(sum(r.handovers for r in records))),
        ("migrations", float(sim.migrations)),
        ("defragmentations", float(sim.defrags)),
        ("spread_moves", float(sim.spread_moves)),
        ("packs_tried", float(sim.pack.tried)),
        ("packs_kept", float(sim.pack.kept)),
        ("packs_undone", float(sim.pack.undone)),
        ("suspended_s", suspended),
        ("busy_gpu_s", ledger.busy_gpu_s),
        ("overhead_gpu_s", ledger.overhead_gpu_s),
        ("held_gpu_s", sim.held_gpu_s),
        ("effective_gpu_s", ledger.effective_gpu_s),
        ("max_progress_residual", ledger.max_residual),
        ("max_memory_pressure", ledger.max_memory_pressure),
    )
    if len(sim.snapshots) == 2:
        (t0, l0, held0), (t1, l1, held1) = sim.snapshots
        extra += (
            ("window_start_s", t0),
            ("window_end_s", t1),
            ("window_busy_gpu_s", l1.busy_gpu_s - l0.busy_gpu_s),
            ("window_overhead_gpu_s", l1.overhead_gpu_s - l0.overhead_gpu_s),
            ("window_effective_gpu_s", l1.effective_gpu_s - l0.effective_gpu_s),
            ("window_held_gpu_s", held1 - held0),
        )
    stats = RunStats(events=sim.engine.events_processed, elapsed_s=elapsed_s)
    return SimResult(
        records=records,
        timeline=sim.timeline.freeze(),
        stats=stats,
        total_gpu_milli=sim.state.total_gpu_milli,
        end_s=end,
        extra=extra,
    )


def _record(
    run: JobRun, end: float, rejected: str | None, queued: bool, measured: bool
) -> JobRecord:
    spec = run.spec
    if rejected is not None:
        status, reason = JobStatus.REJECTED, rejected
    elif run.finished:
        status, reason = JobStatus.COMPLETED, ""
    elif queued:
        status, reason = JobStatus.QUEUED, "no free or shareable GPU set (gandiva)"
    else:
        status, reason = JobStatus.RUNNING, ""
    started = not math.isnan(run.start_s)
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
        gpu_model=run.first_model,
        measured=measured,
        gpu_milli_seconds=run.gpu_milli_s,
        alone_s=run.alone_s,
        suspended_s=suspended,
        migrations=run.migrations,
        handovers=run.handovers,
    )
