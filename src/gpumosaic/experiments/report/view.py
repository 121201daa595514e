"""A result folder read for the report: its runs, how they group, its experiment file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from gpumosaic.errors import InputError
from gpumosaic.experiments.results.store import (
    EXPERIMENT_FILE,
    RUNS_TABLE,
    check_store,
    run_folder,
)
from gpumosaic.experiments.study.file import Experiment, parse_experiment
from gpumosaic.experiments.study.kinds.base import field_names

NOT_AXES = ("run_id", "kind", "notes", "axis")


@dataclass(frozen=True, slots=True)
class StudyView:
    root: Path
    experiment: Experiment
    runs: pd.DataFrame  # one row per run, in grid order
    axes: tuple[str, ...]  # grid axes whose values vary across runs
    group_axes: tuple[str, ...]  # the rows of the grid table
    metrics: tuple[str, ...]
    others: int  # runs stored in the folder that this experiment file does not plan

    def groups(self, axes: tuple[str, ...] | None = None) -> list[tuple[str, pd.DataFrame]]:
        """(label, runs) per combination of ``axes`` (default: group_axes), in grid order."""
        axes = self.group_axes if axes is None else axes
        if not axes:
            return [("all runs", self.runs)]
        keys = self.runs[list(axes)].apply(lambda column: column.map(_fmt)).agg(" ".join, axis=1)
        out = []
        for key in dict.fromkeys(keys):
            part = self.runs[keys == key]
            out.append((label(part.iloc[0], axes), part))
        return out

    def run_label(self, row: Any) -> str:
        return label(row, self.axes) or str(row["run_id"])

    def table(
        self, run_id: str, name: str, columns: list[str] | None = None
    ) -> pd.DataFrame | None:
        """A run's table (None if the run has none); ``columns``: those of them it has."""
        path = run_folder(self.root, run_id) / f"{name}.parquet"
        if not path.is_file():
            return None
        if columns is not None:
            present = set(pq.read_schema(path).names)
            columns = [c for c in columns if c in present]
        return pq.read_table(path, columns=columns).to_pandas()


def label(row: Any, axes: tuple[str, ...]) -> str:
    if len(axes) == 1:
        return _fmt(row[axes[0]])
    return " ".join(f"{a}={_fmt(row[a])}" for a in axes)


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def load_view(root: Path) -> StudyView:
    check_store(root)
    path = root / EXPERIMENT_FILE
    experiment = parse_experiment(path.read_text(), path, check_grid=False)
    stored = pd.read_parquet(root / RUNS_TABLE)
    # The experiment file's runs, in its grid order (a folder may also hold runs of an
    # earlier version of the file: they stay queryable, the report counts them).
    order = {r.run_id: i for i, r in enumerate(experiment.runs())}
    mine = stored["run_id"].isin(list(order))
    runs = stored[mine].assign(_order=stored.loc[mine, "run_id"].map(order))
    runs = runs.sort_values("_order").drop(columns="_order").reset_index(drop=True)
    if runs.empty:
        raise InputError(
            f"none of the {len(stored)} stored runs is planned by {EXPERIMENT_FILE}", path=root
        )
    grid_axes = [a for a in experiment.axes if a in runs.columns]
    axes = tuple(a for a in grid_axes if runs[a].map(_fmt).nunique() > 1)
    group = tuple(experiment.report.group_by) or tuple(a for a in axes if a != "seed")
    metrics = tuple(experiment.report.metrics) or experiment.kind.default_metrics
    metrics = tuple(m for m in metrics if m in field_names(experiment.kind.metrics_type))
    return StudyView(root, experiment, runs, axes, group, metrics, int((~mine).sum()))
