"""The report's tables: the grid (means and 95% intervals), ours beside the reference, and
per run the counted reasons jobs waited or were rejected."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpumosaic.experiments.report.stats import MeanCI, mean_ci
from gpumosaic.experiments.report.view import StudyView

QUEUED_FIRST = "queued, then started"  # the wait's cause is not recorded, only that it was


@dataclass(frozen=True, slots=True)
class GridRow:
    group: str
    runs: int
    cells: tuple[MeanCI, ...]  # one per view.metrics


def grid_rows(view: StudyView) -> list[GridRow]:
    return [
        GridRow(group, len(runs), tuple(mean_ci(runs[m]) for m in view.metrics))
        for group, runs in view.groups()
    ]


@dataclass(frozen=True, slots=True)
class Ratio:
    """A reference row against the first row of its set (same metric and source): what
    carries over when the absolute values cannot (another job draw, another machine)."""

    base: str  # the first row's ``where``
    ours: float  # ours / ours of the base row
    reference: float  # reference / reference of the base row

    @property
    def error_pct(self) -> float:
        if not (math.isfinite(self.ours) and math.isfinite(self.reference)) or not self.reference:
            return math.nan
        return 100.0 * (self.ours / self.reference - 1.0)


@dataclass(frozen=True, slots=True)
class ReferenceRow:
    where: str
    metric: str
    ours: MeanCI
    reference: float
    source: str
    ratio: Ratio | None = None  # None for the first row of its set, or a set of one

    @property
    def error_pct(self) -> float:
        if self.ours.n == 0 or self.reference == 0:
            return math.nan
        return 100.0 * (self.ours.mean - self.reference) / abs(self.reference)


def reference_rows(view: StudyView) -> list[ReferenceRow]:
    """Ours beside each reference; a row whose reference shares its metric and source with
    an earlier row also gets the ratio of both to that first row."""
    rows = _absolute_rows(view)
    first: dict[tuple[str, str], ReferenceRow] = {}
    out = []
    for row in rows:
        base = first.setdefault((row.metric, row.source), row)
        if base is row:
            out.append(row)
            continue
        ours = row.ours.mean / base.ours.mean if base.ours.n and base.ours.mean else math.nan
        reference = row.reference / base.reference if base.reference else math.nan
        out.append(
            ReferenceRow(row.where, row.metric, row.ours, row.reference, row.source,
                         Ratio(base.where, ours, reference))
        )  # fmt: skip
    return out


def _absolute_rows(view: StudyView) -> list[ReferenceRow]:
    out = []
    runs = view.runs
    for ref in view.experiment.reference:
        mask = np.ones(len(runs), dtype=bool)
        for key, value in ref.where.items():
            column = runs[key]
            target = str(float(value)) if column.dtype.kind == "f" else str(value)
            mask &= (column.astype(str) == target).to_numpy()
        chosen = runs.loc[mask, ref.metric] if ref.metric in runs else pd.Series([], dtype=float)
        where = ", ".join(f"{k}={v}" for k, v in ref.where.items()) or "all runs"
        out.append(ReferenceRow(where, ref.metric, mean_ci(chosen), ref.value, ref.source))
    return out


@dataclass(frozen=True, slots=True)
class ReasonCounts:
    run: str
    jobs: int
    counts: tuple[int, ...]  # one per reason of ReasonTable.reasons


@dataclass(frozen=True, slots=True)
class ReasonTable:
    reasons: tuple[str, ...]
    rows: tuple[ReasonCounts, ...]


def reason_category(reason: str) -> str:
    """``"waiting (cpu): needs ..."`` -> ``"waiting (cpu)"``: the verdict without details."""
    return reason.split(":", 1)[0].strip()


def reason_table(view: StudyView) -> ReasonTable:
    per_run: list[tuple[str, int, dict[str, int]]] = []
    for _, row in view.runs.iterrows():
        columns = ["status", "rejection", "reason", "queueing_s", "start_s"]
        jobs = view.table(str(row["run_id"]), "jobs", columns)
        if jobs is None:
            continue
        counts: dict[str, int] = {}
        if "reason" in jobs:
            failed = jobs.loc[(jobs["reason"] != "") & (jobs["status"] != "completed")]
            typed = "rejection" in jobs  # stores written since issue 25
            keys = ["status", "reason", "rejection"] if typed else ["status", "reason"]
            # Count (status, reason) first: a run has few distinct verdicts.
            pairs = failed.value_counts(keys)
            for found, n in zip(pairs.index.tolist(), pairs.tolist(), strict=True):
                status, reason = found[0], found[1]
                code = found[2] if typed else ""
                # A rejection by its typed reason; other verdicts by the words' head.
                verdict = code if code else reason_category(str(reason))
                key = f"{status}: {verdict}"
                counts[key] = counts.get(key, 0) + int(n)
        if "queueing_s" in jobs:
            waited = (jobs["queueing_s"] > 0) & jobs["start_s"].notna()
            if waited.any():
                counts[QUEUED_FIRST] = int(waited.sum())
        per_run.append((view.run_label(row), len(jobs), counts))
    names = tuple(sorted({k for _, _, c in per_run for k in c}))
    rows = tuple(ReasonCounts(run, n, tuple(c.get(r, 0) for r in names)) for run, n, c in per_run)
    return ReasonTable(names, rows)
