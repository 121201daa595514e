"""gpumosaic's own job-list format, CSV or YAML (documented in docs/joblist.md).

One job per row (CSV) or per item of ``jobs:`` (YAML). Work is given either as
``duration_s`` (seconds, on any GPU) or as ``steps`` of a ``job_type`` from Gavel's
throughput table (speed then depends on the GPU model); one file uses one of the two.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gpumosaic.errors import InputError, did_you_mean
from gpumosaic.model.gpu import UnknownGpuModelError, gpu_model
from gpumosaic.model.job import JobSpec
from gpumosaic.traces.text import read_user_text

# Sanity bounds of a job list's numbers (not calibrated: far beyond any real job, small
# enough that sums and int64 arrays of them stay exact): times up to ~31.7 years, a
# job's GPUs up to a cluster's limit, CPU and memory up to a million cores / 10 PiB.
MAX_SECONDS = 1e9
MAX_STEPS = 1e15
MAX_GPUS = 100_000
MAX_CPU_MILLI = 10**9
MAX_MEMORY_MIB = 10**10
MAX_PRIORITY_WEIGHT = 1e6


class JobRow(BaseModel):
    """One job as written in the file. Field names are the column names. Every number is
    finite (``nan``, ``inf`` are errors) and within the bounds above."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, allow_inf_nan=False)

    id: int | None = Field(default=None, ge=0, le=2**62)
    name: str = ""
    job_type: str = ""
    arrival_s: float = Field(ge=0, le=MAX_SECONDS)
    num_gpu: int = Field(ge=0, le=MAX_GPUS)
    gpu_milli: int = Field(default=1000, ge=0, le=1000)
    duration_s: float | None = Field(default=None, gt=0, le=MAX_SECONDS)
    steps: float | None = Field(default=None, gt=0, le=MAX_STEPS)
    cpu_milli: int = Field(default=0, ge=0, le=MAX_CPU_MILLI)
    memory_mib: int = Field(default=0, ge=0, le=MAX_MEMORY_MIB)
    gpu_memory_mib: int | None = Field(default=None, ge=0, le=MAX_MEMORY_MIB)
    gpu_time_fraction: float = Field(default=1.0, gt=0, le=1)
    gpu_spec: str = ""
    priority_weight: float = Field(default=1.0, gt=0, le=MAX_PRIORITY_WEIGHT)
    entity: str = ""
    slo_s: float | None = Field(default=None, gt=0, le=MAX_SECONDS)
    may_span_nodes: bool = False  # a multi-GPU job may use GPUs of several servers

    @field_validator("gpu_spec")
    @classmethod
    def _known_models(cls, value: str) -> str:
        for part in filter(None, (p.strip() for p in value.split("|"))):
            try:
                gpu_model(part)
            except UnknownGpuModelError as err:
                raise ValueError(str(err)) from None
        return value


@dataclass(frozen=True, slots=True)
class JobList:
    jobs: tuple[JobSpec, ...]
    uses_steps: bool  # True: work is Gavel steps of job_type; False: seconds
    path: str = ""
    row_of: tuple[tuple[int, int], ...] = ()  # (job id, row number users see)

    def row(self, job_id: int) -> int | None:
        return dict(self.row_of).get(job_id)


def load_job_list(path: str | Path) -> JobList:
    """Read a CSV or YAML job list; any bad value raises InputError naming row and field."""
    file = Path(path)
    if not file.exists():
        raise InputError("no such file", path=file)
    rows, first_row = _read_rows(file)
    jobs: list[JobSpec] = []
    row_of: list[tuple[int, int]] = []
    modes: set[bool] = set()
    for offset, raw in enumerate(rows):
        row_no = first_row + offset
        cleaned = {k: v for k, v in raw.items() if v not in ("", None)}
        try:
            row = JobRow.model_validate(cleaned)
        except ValidationError as err:
            first = err.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or None
            message = first["msg"].removeprefix("Value error, ")
            if first["type"] == "extra_forbidden" and field is not None:  # a YAML key
                message = f"unknown key{did_you_mean(field, JobRow.model_fields)}"
            raise InputError(message, path=file, row=row_no, field=field) from None
        jobs.append(_to_job(row, offset, file, row_no, modes))
        row_of.append((jobs[-1].id, row_no))
    if not jobs:
        raise InputError("the job list is empty", path=file)
    if len({j.id for j in jobs}) != len(jobs):
        raise InputError("job ids must be unique", path=file, field="id")
    jobs.sort(key=lambda j: (j.arrival_s, j.id))
    return JobList(tuple(jobs), modes == {True}, str(file), tuple(row_of))


def _to_job(row: JobRow, index: int, file: Path, row_no: int, modes: set[bool]) -> JobSpec:
    def fail(message: str, field: str) -> InputError:
        return InputError(message, path=file, row=row_no, field=field)

    if (row.duration_s is None) == (row.steps is None):
        raise fail("give exactly one of duration_s and steps", "duration_s")
    uses_steps = row.steps is not None
    modes.add(uses_steps)
    if len(modes) > 1:
        raise fail("one file must use duration_s throughout or steps throughout", "steps")
    if uses_steps and not row.job_type:
        raise fail("steps need a job_type from the throughput table", "job_type")
    if row.num_gpu > 0 and row.gpu_milli < 1:
        raise fail("gpu_milli must be in 1..1000 for a GPU job", "gpu_milli")
    if row.num_gpu > 1 and row.gpu_milli != 1000:
        raise fail("a multi-GPU job must ask for whole GPUs (gpu_milli 1000)", "gpu_milli")
    allowed = frozenset(p.strip().upper() for p in row.gpu_spec.split("|") if p.strip()) or None
    work = row.steps if row.steps is not None else row.duration_s
    assert work is not None
    job_id = row.id if row.id is not None else index
    return JobSpec(
        id=job_id,
        arrival_s=row.arrival_s,
        job_type=row.job_type or "job",
        num_gpu=row.num_gpu,
        gpu_milli=row.gpu_milli if row.num_gpu else 0,
        work=work,
        cpu_milli=row.cpu_milli,
        memory_mib=row.memory_mib,
        gpu_memory_mib=row.gpu_memory_mib,
        gpu_time_fraction=row.gpu_time_fraction,
        allowed_models=allowed,
        priority_weight=row.priority_weight,
        entity=row.entity,
        slo_s=row.slo_s,
        name=row.name or f"job{job_id}",
        may_span_nodes=row.may_span_nodes,
    )


def _read_rows(file: Path) -> tuple[Sequence[Mapping[str, Any]], int]:
    """Rows as dicts and the number users see for the first one (CSV line / YAML item)."""
    suffix = file.suffix.lower()
    if suffix == ".csv":
        reader = csv.DictReader(io.StringIO(read_user_text(file, what="job list")))
        fields = reader.fieldnames or []
        known = set(JobRow.model_fields)
        for name in fields:
            if name.strip() not in known:
                hint = did_you_mean(name.strip(), known)
                raise InputError(f"unknown column {name!r}{hint}", path=file, row=1, field=name)
        missing = [c for c in ("arrival_s", "num_gpu") if c not in fields]
        if missing:
            raise InputError("missing column", path=file, row=1, field=missing[0])
        rows = [{k.strip(): v for k, v in r.items() if k is not None} for r in reader]
        for offset, r in enumerate(rows):
            if None in r.values():
                raise InputError("too few values", path=file, row=offset + 2)
        return rows, 2  # line 1 is the header
    if suffix in (".yaml", ".yml"):
        try:
            doc = yaml.safe_load(read_user_text(file, what="job list"))
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            line = mark.line + 1 if mark is not None else None
            raise InputError(f"not valid YAML: {err}", path=file, row=line) from None
        items = doc.get("jobs") if isinstance(doc, dict) else None
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise InputError("expected a mapping with a list 'jobs:' of mappings", path=file)
        return items, 1  # YAML rows are numbered from 1 (the item index)
    raise InputError("a job list must end in .csv, .yaml or .yml", path=file)
