"""Gavel's ``.trace`` job files (scheduler/traces/*.trace in the Gavel repository).

One job per line, tab-separated, ten columns:

==  ==================  ============================================================
 1  job type            e.g. ``ResNet-50 (batch size 128)``; must be in the table
 2  command             kept as the job's name (not run)
 3  working directory   ignored
 4  num-steps argument  ignored
 5  needs data dir      0 or 1, ignored
 6  total steps         work, a number >= 0
 7  scale factor        GPUs, an integer >= 1
 8  priority weight     a number > 0
 9  SLO                 -1 for none, else a factor of the job's duration alone on a V100
10  arrival time        seconds, >= 0
11  gpu_milli           optional (gpumosaic's extension): share of each GPU, 1..1000
==  ==================  ============================================================

Blank lines and lines starting with ``#`` are skipped. Jobs get ids 0, 1, ... in file
order and are returned sorted by arrival time (stable). Every bad row raises an
``InputError`` naming the file, the line and the column.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from gpumosaic.errors import InputError
from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.job import JobSpec
from gpumosaic.traces.text import read_user_text

COLUMNS = (
    "job_type",
    "command",
    "working_directory",
    "num_steps_arg",
    "needs_data_dir",
    "total_steps",
    "scale_factor",
    "priority_weight",
    "slo",
    "arrival_time",
    "gpu_milli",
)
REQUIRED_COLUMNS = 10
SLO_REFERENCE_GPU = "v100"


class MeasuredJobs(Protocol):
    """What the reader checks rows against: Gavel's throughput table
    (``workloads.throughputs.GavelThroughputTable``)."""

    source: str
    job_types: tuple[str, ...]
    gpu_types: tuple[str, ...]

    def has(self, job_type: str, scale_factor: int, gpu_type: str) -> bool: ...

    def isolated(self, job_type: str, scale_factor: int, gpu_type: str) -> float: ...


def load_gavel_trace(path: str | Path, table: MeasuredJobs) -> list[JobSpec]:
    """Read a Gavel trace into JobSpecs (sorted by arrival); rows are checked against
    ``table`` (Gavel's throughput table)."""
    text = read_user_text(path, what="trace")
    jobs: list[JobSpec] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        jobs.append(_parse_row(line, path, line_no, len(jobs), table))
    if not jobs:
        raise InputError("the trace has no jobs", path=path)
    return sorted(jobs, key=lambda j: j.arrival_s)


def _parse_row(line: str, path: str | Path, row: int, job_id: int, table: MeasuredJobs) -> JobSpec:
    cells = line.rstrip("\r\n").split("\t")
    if len(cells) not in (REQUIRED_COLUMNS, REQUIRED_COLUMNS + 1):
        raise InputError(
            f"expected {REQUIRED_COLUMNS} tab-separated columns (or 11 with gpu_milli), "
            f"got {len(cells)}",
            path=path,
            row=row,
        )

    def number(index: int) -> float:
        field = COLUMNS[index]
        try:
            value = float(cells[index])
        except ValueError:
            raise InputError(
                f"not a number: {cells[index]!r}", path=path, row=row, field=field
            ) from None
        if value != value or value in (float("inf"), float("-inf")):
            raise InputError(
                f"not a finite number: {cells[index]!r}", path=path, row=row, field=field
            )
        return value

    def integer(index: int) -> int:
        value = number(index)
        if value != int(value):
            raise InputError(
                f"not an integer: {cells[index]!r}", path=path, row=row, field=COLUMNS[index]
            )
        return int(value)

    job_type = cells[0].strip()
    if job_type not in table.job_types:
        raise InputError(
            f"unknown job type {job_type!r} (not in the throughput table {table.source})",
            path=path,
            row=row,
            field="job_type",
        )
    steps = number(5)
    if steps < 0:
        raise InputError(f"negative total steps {steps:g}", path=path, row=row, field="total_steps")
    scale = integer(6)
    if scale < 1:
        raise InputError(
            f"scale factor must be >= 1, got {scale}", path=path, row=row, field="scale_factor"
        )
    if not any(table.has(job_type, scale, g) for g in table.gpu_types):
        raise InputError(
            f"the throughput table has no {job_type!r} job on {scale} GPUs",
            path=path,
            row=row,
            field="scale_factor",
        )
    weight = number(7)
    if weight <= 0:
        raise InputError(
            f"priority weight must be > 0, got {weight:g}",
            path=path,
            row=row,
            field="priority_weight",
        )
    slo_factor = number(8)
    arrival = number(9)
    if arrival < 0:
        raise InputError(
            f"negative arrival time {arrival:g}", path=path, row=row, field="arrival_time"
        )
    milli = MILLI_PER_GPU
    if len(cells) > REQUIRED_COLUMNS:
        milli = integer(10)
        if not 1 <= milli <= MILLI_PER_GPU:
            raise InputError(
                f"gpu_milli must be in 1..1000, got {milli}", path=path, row=row, field="gpu_milli"
            )
        if scale > 1 and milli != MILLI_PER_GPU:
            raise InputError(
                "a multi-GPU job must ask for whole GPUs (gpu_milli 1000)",
                path=path,
                row=row,
                field="gpu_milli",
            )
    slo_s = None
    if slo_factor > 0 and table.has(job_type, scale, SLO_REFERENCE_GPU):
        # Gavel's SLO is a factor of the job's duration alone on the reference GPU.
        slo_s = slo_factor * steps / table.isolated(job_type, scale, SLO_REFERENCE_GPU)
    return JobSpec(
        id=job_id,
        arrival_s=arrival,
        job_type=job_type,
        num_gpu=scale,
        gpu_milli=milli,
        work=steps,
        priority_weight=weight,
        slo_s=slo_s,
        name=f"job{job_id}",
        may_span_nodes=True,  # Gavel's jobs are distributed: they may span servers
    )
