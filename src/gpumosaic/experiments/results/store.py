"""The result store of a study: a folder written run by run as runs finish.

```
DIR/experiment.toml          the experiment file as last run into DIR
DIR/runs.parquet             one row per finished run: run_id, kind, the grid point's
                             columns, the summary metrics, notes
DIR/runs/RUN_ID/run.json     the run description (what exactly ran)
DIR/runs/RUN_ID/jobs.parquet, timeline.parquet, placements.parquet   (each with run_id)
DIR/runs/RUN_ID/row.json     the run's row; written last, so its presence = finished
```

A run whose folder lacks ``row.json`` did not finish (killed mid-write) and runs again.
A row also keeps ``inputs``, the size and time of change of every file its grid point
names (a job list, a node CSV): a run stored from an older version of such a file is not
reused (``input_fingerprint``; the runs table leaves the key out).
``runs.parquet`` is rewritten (atomically) after every run from the rows, so it always
lists exactly the finished runs.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError:  # a study's store is Parquet: the parquet extra
    from gpumosaic.errors import InputError

    raise InputError("studies store Parquet tables: pip install 'gpumosaic[parquet]'") from None

from gpumosaic.errors import InputError
from gpumosaic.experiments.results.product import RunProduct

RUNS_TABLE = "runs.parquet"
EXPERIMENT_FILE = "experiment.toml"
ROW_FILE = "row.json"
INPUTS_KEY = "inputs"
TABLES = ("jobs", "timeline", "placements")


class ResultStore:
    """The one writer of a result folder (the process that runs the study)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.runs_dir = root / "runs"
        self._rows: dict[str, dict[str, Any]] = {}
        if self.runs_dir.is_dir():
            for row_path in sorted(self.runs_dir.glob(f"*/{ROW_FILE}")):
                row = json.loads(row_path.read_text())
                self._rows[row["run_id"]] = row

    def finished(self) -> set[str]:
        return set(self._rows)

    def inputs(self, run_id: str) -> str:
        """The input fingerprint the run was stored with ("" for none or an older row)."""
        return str(self._rows.get(run_id, {}).get(INPUTS_KEY, ""))

    def save_experiment(self, text: str) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        _atomic_write(self.root / EXPERIMENT_FILE, text.encode())

    def add(self, run_id: str, kind: str, product: RunProduct, inputs: str = "") -> None:
        folder = self.runs_dir / run_id
        folder.mkdir(parents=True, exist_ok=True)
        description = {"run_id": run_id, **product.description, "axis": product.axis}
        _atomic_write(folder / "run.json", _json(description).encode())
        for named in product.tables:
            table = named.table
            table = table.add_column(0, "run_id", pa.array([run_id] * table.num_rows))
            tmp = folder / f".{named.name}.parquet.tmp"
            pq.write_table(table, tmp)
            os.replace(tmp, folder / f"{named.name}.parquet")
        row = {
            "run_id": run_id,
            "kind": kind,
            **asdict(product.point),
            **{k: _finite(v) for k, v in asdict(product.metrics).items()},
            "notes": "; ".join(product.notes),
            "axis": product.axis,
            INPUTS_KEY: inputs,
        }
        _atomic_write(folder / ROW_FILE, _json(row).encode())
        self._rows[run_id] = row
        self.write_runs_table()

    def write_runs_table(self) -> None:
        rows = [{k: v for k, v in row.items() if k != INPUTS_KEY} for row in self._rows.values()]
        table = (
            pa.Table.from_pylist(rows) if rows else pa.table({"run_id": pa.array([], pa.string())})
        )
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".{RUNS_TABLE}.tmp"
        pq.write_table(table, tmp)
        os.replace(tmp, self.root / RUNS_TABLE)


def input_fingerprint(point: Any, seen: dict[str, str] | None = None) -> str:
    """Size and time of change of each file a grid point's values name (``a.csv``, or
    ``trace:a.csv,...``): "" when it names none. ``seen``: each value's part, kept across
    the points of one study (a file is read once however many runs name it)."""
    seen = {} if seen is None else seen
    parts = []
    for value in asdict(point).values():
        if isinstance(value, str) and value:
            if value not in seen:
                seen[value] = _file_stamp(value)
            if seen[value]:
                parts.append(seen[value])
    return ";".join(parts)


def _file_stamp(value: str) -> str:
    stamps = []
    for candidate in dict.fromkeys((value, value.partition(":")[2].partition(",")[0])):
        try:
            path = Path(candidate)
            if path.is_file():
                stat = path.stat()
                stamps.append(f"{candidate}:{stat.st_size}:{stat.st_mtime_ns}")
        except (OSError, ValueError):
            continue
    return ";".join(stamps)


def check_store(root: Path) -> None:
    """A user-facing error unless ``root`` is a result folder with at least one run."""
    if not (root / RUNS_TABLE).is_file() and "written by gpumosaic compare" in _text(
        root / EXPERIMENT_FILE
    ):
        raise InputError(
            "a compare folder, not a result store (an older gpumosaic's): gpumosaic run "
            f"{root / EXPERIMENT_FILE} --out {root} makes one (it runs the comparison's "
            "runs into it)",
            path=root,
        )
    if not (root / RUNS_TABLE).is_file():
        raise InputError(
            f"no {RUNS_TABLE} here: not a result folder (gpumosaic run EXPERIMENT.toml "
            "--out DIR writes one)",
            path=root,
        )


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return ""


def run_folder(root: Path, run_id: str) -> Path:
    return root / "runs" / run_id


def read_description(root: Path, run_id: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_folder(root, run_id) / "run.json").read_text())
    return data


def read_table(root: Path, run_id: str, name: str) -> pa.Table | None:
    path = run_folder(root, run_id) / f"{name}.parquet"
    return pq.read_table(path) if path.is_file() else None


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, default=str) + "\n"


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
