"""What every figure of a report is of, as the PNGs of ``compare`` say it (issue 36): the
scenario its runs share (cluster, workload, background, seeds), and, where the groups
being compared finished different job sets, each group's count and a note saying so."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpumosaic.experiments.plots.runs import different_jobs_note
from gpumosaic.experiments.plots.style import seeds_label
from gpumosaic.experiments.report.view import StudyView, _fmt

# The columns that say what the runs are of, in the order a title names them (those a kind
# has: the event simulator's cluster and workload, a fill replay's nodes and tasks, ...).
_SCENARIO_COLUMNS = (
    "cluster", "nodes", "workload", "tasks", "background", "job", "part", "policy", "sharing",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Scenario:
    text: str  # "cluster v100:2 · workload gavel:jobs=6 · background ... · seeds 0-1"
    counts: dict[str, str]  # group label -> "384 of 400 jobs done" (only where sets differ)
    note: str  # "different job sets: ..." or ""


def scenario(view: StudyView) -> Scenario:
    runs = view.runs
    parts: list[str] = []
    for column in _SCENARIO_COLUMNS:
        if column not in runs or column in view.group_axes:
            continue  # absent, or each series' label names it
        values = list(dict.fromkeys(runs[column].map(_fmt)))
        if (column, values) in (("sharing", ["none"]), ("background", ["-"])):
            continue  # the defaults: nothing to say
        parts.append(f"{column} {', '.join(values)}")
    if "seed" in runs:
        parts.append(seeds_label([int(s) for s in runs["seed"].dropna()]))
    counts, note = _job_sets(view)
    return Scenario(" · ".join(p for p in parts if p), counts, note)


def _job_sets(view: StudyView) -> tuple[dict[str, str], str]:
    """Per group, its completed jobs of all (mean over its runs), where the groups
    completed different numbers of jobs; else nothing."""
    if "completed" not in view.runs or "jobs" not in view.runs:
        return {}, ""
    groups = view.groups()
    completed = {g: [int(v) for v in r["completed"].fillna(0)] for g, r in groups}
    jobs = {g: [int(v) for v in r["jobs"].fillna(0)] for g, r in groups}
    note = different_jobs_note(list(completed), completed, jobs)
    if not note:
        return {}, ""
    counts = {
        g: f"{_count(float(np.mean(completed[g])))} of {_count(float(np.mean(jobs[g])))} jobs done"
        for g in completed
        if completed[g]
    }
    return counts, note


def _count(value: float) -> str:
    return f"{value:,.0f}" if value == round(value) else f"{value:,.1f}"
