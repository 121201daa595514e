"""FGD's target workload for a live cluster: a fixed task list, or learned from pods.

``--target-workload openb:default`` (or a task-list / job-list file) fixes M as ``fill``
does. Without it the extender learns M from the last ``size`` pods it was asked about
(a sliding window) and rebuilds it after ``refresh_every`` new pods, more often while the
window is young (after 1, 2, 4, 8, ... pods), so that the first decisions already follow
the pods seen so far.
"""

from __future__ import annotations

import csv
from collections import deque
from pathlib import Path

from gpumosaic.errors import InputError
from gpumosaic.model.job import JobSpec
from gpumosaic.placement.workload import TargetWorkload

DEFAULT_WINDOW = 2000
DEFAULT_REFRESH = 100


def load_target_jobs(spec: str) -> list[JobSpec]:
    """``openb:NAME`` or an openb task-list CSV, or a gpumosaic job list (.csv/.yaml)."""
    from gpumosaic.traces.joblist import load_job_list
    from gpumosaic.traces.openb import load_openb_tasks

    text = spec.strip()
    path = Path(text)
    if text.startswith("openb:"):
        return load_openb_tasks(text)
    if path.suffix.lower() in (".yaml", ".yml"):
        return list(load_job_list(path).jobs)
    if path.suffix.lower() == ".csv":
        if not path.exists():
            raise InputError("no such file", path=path, field="--target-workload")
        with path.open(newline="") as handle:
            header = next(csv.reader(handle), [])
        if "arrival_s" in header:  # gpumosaic's job list; openb task lists have no such column
            return list(load_job_list(path).jobs)
        return load_openb_tasks(text)
    raise InputError(
        f"unknown target workload {text!r}: use openb:NAME, a task-list CSV or a job list",
        field="--target-workload",
    )


class TargetSource:
    """The current target workload; ``observe`` may return a new one."""

    def __init__(self, fixed: TargetWorkload | None, size: int, refresh_every: int) -> None:
        if size < 1 or refresh_every < 1:
            raise InputError("the window and its refresh must be >= 1 pod", field="--window")
        self.fixed = fixed
        self.size = size
        self.refresh_every = refresh_every
        self._window: deque[JobSpec] = deque(maxlen=size)
        self._since = 0
        self.workload: TargetWorkload | None = fixed
        self.rebuilds = 0

    @property
    def learned(self) -> bool:
        return self.fixed is None

    @property
    def window_len(self) -> int:
        return len(self._window)

    def observe(self, job: JobSpec) -> TargetWorkload | None:
        """Count one newly seen pod; the new workload if the window was rebuilt."""
        if self.fixed is not None:
            return None
        self._window.append(job)
        self._since += 1
        if self.workload is not None and self._since < min(self.refresh_every, len(self._window)):
            return None
        self._since = 0
        self.rebuilds += 1
        self.workload = TargetWorkload.from_jobs(list(self._window))
        return self.workload

    def seed(self, jobs: list[JobSpec]) -> None:
        """Fill the window with pods already bound (at start, after a restart)."""
        if self.fixed is not None or not jobs:
            return
        self._window.extend(jobs[-self.size :])
        self.workload = TargetWorkload.from_jobs(list(self._window))
        self._since = 0
