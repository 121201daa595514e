"""A run's job records as columns: read once, then every metric is array arithmetic.

The metrics were Python comprehensions over the records, one per figure (twelve passes
over 97,452 records in the openb replay); the columns hold the same numbers, so every
figure computed from them is the same float, bit for bit (element-wise arithmetic is the
same IEEE operation, and sums keep their order and method).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.sim.result import JobRecord, JobStatus

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
        return cls(
            arrival_s=np.array([r.arrival_s for r in records], dtype=np.float64),
            start_s=np.array([r.start_s for r in records], dtype=np.float64),
            finish_s=np.where(completed, finish, np.nan),
            alone_s=np.array([r.alone_s for r in records], dtype=np.float64),
            demand_gpus=gpu / MILLI_PER_GPU,
            measured=np.array([r.measured for r in records], dtype=bool),
            completed=completed,
            status_counts={s: statuses.count(s) for s in JobStatus},
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
