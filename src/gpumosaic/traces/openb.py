"""Readers for the Alibaba openb trace (cluster-trace-gpu-v2023) used by FGD and PWR.

Specs: ``openb:gpu`` / ``openb:all`` name the packaged node lists, ``openb:NAME`` the
packaged ``openb_pod_list_NAME.csv`` (``default``, ``gpushare40``, ``multigpu20``, ...);
anything else is a file path.

Every bad value raises ``InputError`` naming the file, the 1-based data row (the header is
not a row, so data row N is on line N + 1 of the file; the message says both) and the field.

Pods become JobSpecs:

- ``id`` = data row index (0-based), ``name`` = pod name, ``job_type`` = ``"openb"``;
- ``gpu_milli`` per GPU as in the file (1000 for multi-GPU pods, 0 for CPU-only pods);
- ``gpu_spec`` ``"A|B"`` -> ``allowed_models = {"A", "B"}``; empty -> any model;
- ``arrival_s`` = creation_time (0 when the file has no times: the multigpu variants);
- ``work`` = run time in seconds: deletion_time - scheduled_time, or deletion_time -
  creation_time for pods never scheduled (Pending), clamped at 0; 0 without times.
  The raw times stay available in ``OpenbTrace.times`` for replays that need them.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from gpumosaic.errors import InputError
from gpumosaic.model.cluster import ClusterSpec, NodeSpec
from gpumosaic.model.gpu import MILLI_PER_GPU, GpuModel, UnknownGpuModelError, gpu_model
from gpumosaic.model.job import JobSpec

# The packaged files' names and where a spec points (plain Python: a spec is checked with
# them before numpy loads).
from gpumosaic.traces.openb_files import packaged_task_lists as packaged_task_lists
from gpumosaic.traces.openb_files import resolve_openb as _resolve
from gpumosaic.traces.text import read_user_text

_NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
_POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
_TIME_COLUMNS = ("creation_time", "deletion_time", "scheduled_time")


@dataclass(frozen=True, slots=True)
class OpenbPodTimes:
    """Raw per-pod times (seconds from trace start; NaN where the file leaves it empty)
    and phases, aligned with ``OpenbTrace.jobs``. All NaN / "" for files without times."""

    creation_s: npt.NDArray[np.float64]
    scheduled_s: npt.NDArray[np.float64]
    deletion_s: npt.NDArray[np.float64]
    pod_phase: tuple[str, ...]
    qos: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class OpenbTrace:
    path: str
    jobs: tuple[JobSpec, ...]
    times: OpenbPodTimes


def load_openb_nodes(spec: str) -> ClusterSpec:
    """``openb:gpu`` (the 1,213-node cluster of the papers), ``openb:all`` or a CSV path."""
    path = _resolve(spec, kind="nodes")
    frame = _read(path, _NODE_COLUMNS)
    cpu = _ints(frame, "cpu_milli", path)
    mem = _ints(frame, "memory_mib", path)
    gpus = _ints(frame, "gpu", path)
    models = frame.stripped("model")
    known: dict[str, GpuModel] = {}
    for row, name in enumerate(models, start=1):
        if name and name not in known:
            known[name] = _model(name, path, row, "model")
    # CPU-only nodes (gpu = 0, empty model) still need a GpuModel: they borrow the first
    # model of the file, which changes nothing since they have no GPU slot to use or power.
    filler = next(iter(known.values()), None)
    nodes: list[NodeSpec] = []
    for row, name in enumerate(models, start=1):
        if gpus[row - 1] > 0 and not name:
            raise InputError(
                "a node with GPUs needs a GPU model", path=path, row=row, field="model"
            )
        model = known[name] if name else filler
        if model is None:
            raise InputError("the node list has no GPU node", path=path, row=row, field="model")
        nodes.append(
            NodeSpec(
                name=frame.cells("sn")[row - 1],
                gpu=model,
                num_gpus=int(gpus[row - 1]),
                cpu_milli=int(cpu[row - 1]),
                memory_mib=int(mem[row - 1]),
            )
        )
    if not nodes:
        raise InputError("the node list is empty", path=path)
    return ClusterSpec(tuple(nodes))


def load_openb_tasks(spec: str) -> list[JobSpec]:
    """``openb:default``, ``openb:gpushare40``, ... or a CSV path -> JobSpecs in file order."""
    return list(read_openb_trace(spec).jobs)


def read_openb_trace(spec: str) -> OpenbTrace:
    """The pods of a task list as JobSpecs, plus their raw times and phases."""
    path = _resolve(spec, kind="tasks")
    frame = _read(path, _POD_COLUMNS)
    n = len(frame)
    cpu = _ints(frame, "cpu_milli", path)
    mem = _ints(frame, "memory_mib", path)
    num_gpu = _ints(frame, "num_gpu", path)
    milli = _ints(frame, "gpu_milli", path)
    gpu_task = num_gpu > 0
    bad = np.flatnonzero(gpu_task & ((milli < 1) | (milli > MILLI_PER_GPU)))
    if len(bad):
        raise _row_error(
            path, bad[0], "gpu_milli", f"must be in 1..1000 for a GPU task, got {milli[bad[0]]}"
        )
    bad = np.flatnonzero((num_gpu > 1) & (milli != MILLI_PER_GPU))
    if len(bad):
        raise _row_error(path, bad[0], "gpu_milli", "a multi-GPU task must ask for 1000 per GPU")
    milli = np.where(gpu_task, milli, 0)
    allowed = _gpu_specs(frame, path)
    has_times = all(c in frame.columns for c in _TIME_COLUMNS)
    if has_times:
        creation = _floats(frame, "creation_time", path)
        scheduled = _floats(frame, "scheduled_time", path)
        deletion = _floats(frame, "deletion_time", path)
    else:
        creation = scheduled = deletion = np.full(n, np.nan)
    start = np.where(np.isnan(scheduled), creation, scheduled)
    work = np.nan_to_num(np.maximum(deletion - start, 0.0), nan=0.0)
    arrival = np.nan_to_num(creation, nan=0.0)
    names = frame.cells("name")
    jobs = tuple(
        JobSpec(
            id=i,
            arrival_s=float(arrival[i]),
            job_type="openb",
            num_gpu=int(num_gpu[i]),
            gpu_milli=int(milli[i]),
            work=float(work[i]),
            cpu_milli=int(cpu[i]),
            memory_mib=int(mem[i]),
            allowed_models=allowed[i],
            name=str(names[i]),
        )
        for i in range(n)
    )
    text = {c: frame.cells(c) if c in frame.columns else [""] * n for c in ("pod_phase", "qos")}
    times = OpenbPodTimes(
        creation, scheduled, deletion, tuple(text["pod_phase"]), tuple(text["qos"])
    )
    return OpenbTrace(str(path), jobs, times)


@dataclass(frozen=True, slots=True)
class _CsvTable:
    """A CSV file as text cells by column (header names stripped)."""

    columns: dict[str, list[str]]
    rows: int

    def __len__(self) -> int:
        return self.rows

    def cells(self, column: str) -> list[str]:
        return self.columns[column]

    def stripped(self, column: str) -> list[str]:
        return [cell.strip() for cell in self.columns[column]]


def _read(path: Path, required: tuple[str, ...]) -> _CsvTable:
    """Read every cell as text (so bad values can be reported, not silently coerced).

    The standard library's reader: these files are small and plain, and pandas would cost
    more to import (~0.25 s) than the whole read. Leading blanks of cells are skipped; a
    short row reads as empty cells, a long row is an error naming its line.
    """
    try:
        text = read_user_text(path, what="CSV file")
        rows = list(csv.reader(io.StringIO(text), skipinitialspace=True))
    except csv.Error as err:
        raise InputError(f"not a readable CSV file ({err})", path=path) from None
    rows = [row for row in rows if row]  # blank lines are skipped, as pandas does
    if not rows:
        raise InputError("not a readable CSV file (no header line)", path=path)
    header = [c.strip() for c in rows[0]]
    data = rows[1:]
    width = len(header)
    for index, row in enumerate(data):
        if len(row) > width:
            raise InputError(
                f"not a readable CSV file (expected {width} fields in line {index + 2}, "
                f"saw {len(row)})",
                path=path,
            )
    missing = [c for c in required if c not in header]
    if missing:
        raise InputError("missing column", path=path, field=missing[0])
    columns = {
        name: [row[i] if i < len(row) else "" for row in data] for i, name in enumerate(header)
    }
    return _CsvTable(columns, len(data))


def _numbers(frame: _CsvTable, column: str, path: Path) -> npt.NDArray[np.float64]:
    """Column as floats; empty cells are NaN; non-numbers and negatives are errors."""
    text = frame.stripped(column)
    values = np.full(len(text), np.nan)
    for i, cell in enumerate(text):
        if not cell:
            continue
        try:
            values[i] = float(cell)
        except ValueError:
            raise _row_error(path, i, column, f"not a number: {cell!r}") from None
    bad = np.flatnonzero(np.isnan(values) & np.array([bool(c) for c in text], dtype=bool))
    if len(bad):
        raise _row_error(path, bad[0], column, f"not a number: {text[bad[0]]!r}")
    bad = np.flatnonzero(values < 0)
    if len(bad):
        raise _row_error(path, bad[0], column, f"must not be negative, got {text[bad[0]]}")
    return values


def _ints(frame: _CsvTable, column: str, path: Path) -> npt.NDArray[np.int64]:
    values = _numbers(frame, column, path)
    bad = np.flatnonzero(np.isnan(values))
    if len(bad):
        raise _row_error(path, bad[0], column, "empty value")
    bad = np.flatnonzero(values != np.floor(values))
    if len(bad):
        raise _row_error(path, bad[0], column, f"must be a whole number, got {values[bad[0]]}")
    return values.astype(np.int64)


def _floats(frame: _CsvTable, column: str, path: Path) -> npt.NDArray[np.float64]:
    return _numbers(frame, column, path)


def _gpu_specs(frame: _CsvTable, path: Path) -> list[frozenset[str] | None]:
    """``gpu_spec`` cells as allowed-model sets; each distinct text is checked once."""
    if "gpu_spec" not in frame.columns:
        return [None] * len(frame)
    cells = frame.stripped("gpu_spec")
    parsed: dict[str, frozenset[str] | None] = {"": None}
    for row, text in enumerate(cells, start=1):
        if text in parsed:
            continue
        names = [part.strip() for part in text.split("|") if part.strip()]
        parsed[text] = frozenset(_model(n, path, row, "gpu_spec").name.upper() for n in names)
    return [parsed[t] for t in cells]


def _model(name: str, path: Path, row: int, field: str) -> GpuModel:
    try:
        return gpu_model(name)
    except UnknownGpuModelError as err:
        raise InputError(
            f"{err} (data row {row}, line {row + 1})", path=path, row=row, field=field
        ) from None


def _row_error(path: Path, index: int | np.integer, field: str, message: str) -> InputError:
    row = int(index) + 1
    return InputError(
        f"{message} (data row {row}, line {row + 1})", path=path, row=row, field=field
    )
