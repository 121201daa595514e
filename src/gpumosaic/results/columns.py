"""A run's job records as columns: read once, then every metric is array arithmetic.

The metrics were Python comprehensions over the records, one per figure (twelve passes
over 97,452 records in the openb replay); the columns hold the same numbers, so every
figure computed from them is the same float, bit for bit (element-wise arithmetic is the
same IEEE operation, and sums keep their order and method).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.results.result import JobRecord, JobStatus

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class JobColumns:
    """One entry per record, in the records' order."""

    arrival_s: FloatArray
    start_s: FloatArray  # NaN: never started
    finish_s: FloatArray  # NaN unless completed
    alone_s: FloatArray
    demand_gpus: FloatArray  # num_gpu x gpu_milli / 1000
    measured: BoolArray
    completed: BoolArray
    status_counts: dict[JobStatus, int]
    never_started: int  # queued jobs that never ran (Outcome.NEVER_STARTED)
    # Totals over all records, summed in record order (Python's float sum).
    suspended_s: float
    thrashing_s: float
    handovers: int
    migrations: int

    @classmethod
    def of(cls, records: tuple[JobRecord, ...]) -> JobColumns:
        statuses = [r.status for r in records]
        completed = np.array([s is JobStatus.COMPLETED for s in statuses], dtype=bool)
        finish = np.array([r.finish_s for r in records], dtype=np.float64)
        gpu = np.array([r.num_gpu * r.gpu_milli for r in records], dtype=np.int64)
        start = np.array([r.start_s for r in records], dtype=np.float64)
        queued = np.array([s is JobStatus.QUEUED for s in statuses], dtype=bool)
        return cls(
            arrival_s=np.array([r.arrival_s for r in records], dtype=np.float64),
            start_s=start,
            finish_s=np.where(completed, finish, np.nan),
            alone_s=np.array([r.alone_s for r in records], dtype=np.float64),
            demand_gpus=gpu / MILLI_PER_GPU,
            measured=np.array([r.measured for r in records], dtype=bool),
            completed=completed,
            status_counts={s: statuses.count(s) for s in JobStatus},
            never_started=int(np.count_nonzero(queued & np.isnan(start))),
            suspended_s=float(sum([r.suspended_s for r in records])),
            thrashing_s=float(sum([r.thrashing_s for r in records])),
            handovers=int(sum([r.handovers for r in records])),
            migrations=int(sum([r.migrations for r in records])),
        )

    def __len__(self) -> int:
        return len(self.arrival_s)

    @property
    def jct_s(self) -> FloatArray:
        """Finish minus arrival (NaN unless completed)."""
        return self.finish_s - self.arrival_s

    @property
    def slowdown_jobs(self) -> BoolArray:
        """Measured, completed jobs with a known alone time: slowdown and fairness
        are over these."""
        alone = self.alone_s
        with np.errstate(invalid="ignore"):
            return self.measured & self.completed & (alone > 0) & ~np.isnan(alone)


def job_table(records: tuple[JobRecord, ...]) -> dict[str, list[Any]]:
    """The one per-job table (``jobs.csv``, ``jobs.parquet``, a study's ``jobs`` table):
    its columns in order. How the job ended is ``outcome`` (typed: completed, rejected,
    running, queued, never_started) with ``rejection`` (the typed reason, "" unless
    rejected) and ``reason`` (in words). Where it ran: ``node`` and ``gpus`` (slots, space
    separated) of its first part (-1 and "" if it never ran or its mechanism re-places
    jobs every round), ``parts`` (a gang spans nodes) and ``placement`` (every part,
    ``node:slots`` joined by ``|``)."""
    first = [r.placement[0] if r.placement else (-1, ()) for r in records]
    return {
        "job_id": [r.job_id for r in records],
        "name": [r.name for r in records],
        "job_type": [r.job_type for r in records],
        "arrival_s": [r.arrival_s for r in records],
        "start_s": [r.start_s for r in records],
        "finish_s": [r.finish_s for r in records],
        "jct_s": [r.jct_s for r in records],
        "queueing_s": [r.queueing_s for r in records],
        "num_gpu": [r.num_gpu for r in records],
        "gpu_milli": [r.gpu_milli for r in records],
        "outcome": [r.outcome.value for r in records],
        "status": [r.status.value for r in records],
        "rejection": [r.rejection.value if r.rejection else "" for r in records],
        "reason": [r.reason for r in records],
        "gpu_model": [r.gpu_model for r in records],
        "node": [node for node, _ in first],
        "gpus": [" ".join(map(str, gpus)) for _, gpus in first],
        "parts": [len(r.placement) for r in records],
        "placement": [
            "|".join(f"{node}:{' '.join(map(str, gpus))}" for node, gpus in r.placement)
            for r in records
        ],
        "measured": [r.measured for r in records],
        "gpu_milli_seconds": [r.gpu_milli_seconds for r in records],
        "alone_s": [r.alone_s for r in records],
        "suspended_s": [r.suspended_s for r in records],
        "migrations": [r.migrations for r in records],
        "thrashing_s": [r.thrashing_s for r in records],
        "handovers": [r.handovers for r in records],
    }
