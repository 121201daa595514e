"""What a run gives back: the result, its summary and the lines about jobs that never fit."""

from __future__ import annotations

from dataclasses import dataclass

from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.filter import explain
from gpumosaic.results.outcome import RejectReason
from gpumosaic.results.result import SimResult
from gpumosaic.results.summary import Summary
from gpumosaic.workloads.load import OfferedLoad
from gpumosaic.workloads.spec import ParsedWorkload


@dataclass(frozen=True, slots=True)
class RunOutcome:
    result: SimResult
    summary: Summary
    never_fit_lines: tuple[str, ...]
    offered_load: OfferedLoad | None = None  # None: jobs do not arrive over time


def never_fit_lines(
    result: SimResult, parsed: ParsedWorkload, cluster: ClusterSpec
) -> tuple[str, ...]:
    """One line per job rejected as never fitting (on one server, or at all), naming
    file, row and field if known."""
    never = (RejectReason.NEVER_FITS, RejectReason.SPANS_SERVERS)
    rejected = [r for r in result.records if r.rejection in never]
    if not rejected:
        return ()
    state = ClusterState(cluster)
    jobs = {j.id: j for j in parsed.job_list.jobs} if parsed.job_list else {}
    lines = []
    for record in rejected:
        job = jobs.get(record.job_id)
        where = record.name or f"job {record.job_id}"
        field = "num_gpu"
        if parsed.job_list is not None and job is not None:
            row = parsed.job_list.row(job.id)
            field = _never_fit_field(state, job)
            where = f"{parsed.job_list.path}, row {row}, field {field!r}"
        lines.append(f"{where}: {record.reason}")
    return tuple(lines)


def _never_fit_field(state: ClusterState, job: JobSpec) -> str:
    if job.num_gpu and not state.model_mask(job.allowed_models).any():
        return "gpu_spec"
    if job.num_gpu > int(state.num_gpus.max()):
        return "num_gpu"
    if job.cpu_milli > int(state.cpu_capacity.max()):
        return "cpu_milli"
    if job.memory_mib > int(state.memory_capacity.max()):
        return "memory_mib"
    return explain(state, job).reason.value
