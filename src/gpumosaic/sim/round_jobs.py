"""Per-job state of the round simulator, in growable numpy arrays (row = arrival order).

One owner (the round simulator) mutates it; rows never move, so other tables (entities,
leases) refer to jobs by row.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpumosaic.model.job import JobSpec
from gpumosaic.policies.base import FloatArray
from gpumosaic.sim.policy_input import JobColumns
from gpumosaic.sim.result import JobRecord, JobStatus

IntArray = npt.NDArray[np.int64]
_INITIAL_ROWS = 256


class JobStore:
    def __init__(self, n_types: int) -> None:
        self.n_types = n_types
        self.specs: list[JobSpec] = []
        self.measured: list[bool] = []
        self.rates = np.zeros((_INITIAL_ROWS, n_types))
        self.total_steps = np.zeros(_INITIAL_ROWS)
        self.done_steps = np.zeros(_INITIAL_ROWS)
        self.attained_s = np.zeros(_INITIAL_ROWS)  # GPU-seconds received
        self.milli_s = np.zeros(_INITIAL_ROWS)  # milli-GPU held x seconds
        self.start_s = np.full(_INITIAL_ROWS, np.nan)
        self.finish_s = np.full(_INITIAL_ROWS, np.nan)
        self.first_type = np.full(_INITIAL_ROWS, -1, dtype=np.int64)
        self.demand_milli = np.zeros(_INITIAL_ROWS, dtype=np.int64)
        self.is_active = np.zeros(_INITIAL_ROWS, dtype=bool)
        self.rejected: dict[int, str] = {}  # row -> reason
        self.active_rows: list[int] = []  # arrival order

    def __len__(self) -> int:
        return len(self.specs)

    def _grow(self) -> None:
        cap = 2 * len(self.total_steps)
        for name in (
            "rates",
            "total_steps",
            "done_steps",
            "attained_s",
            "milli_s",
            "start_s",
            "finish_s",
            "first_type",
            "demand_milli",
            "is_active",
        ):
            old = getattr(self, name)
            fill = (
                np.nan if name in ("start_s", "finish_s") else (-1 if name == "first_type" else 0)
            )
            new = np.full((cap, *old.shape[1:]), fill, dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)

    def add(self, spec: JobSpec, rates: FloatArray, measured: bool) -> int:
        row = len(self.specs)
        if row == len(self.total_steps):
            self._grow()
        self.specs.append(spec)
        self.measured.append(measured)
        self.rates[row] = rates
        self.total_steps[row] = spec.work
        self.demand_milli[row] = max(spec.num_gpu, 1) * spec.gpu_milli
        return row

    def activate(self, row: int) -> None:
        self.is_active[row] = True
        self.active_rows.append(row)

    def reject(self, row: int, reason: str) -> None:
        self.rejected[row] = reason

    def complete(self, rows: list[int], finish: list[float]) -> None:
        for row, t in zip(rows, finish, strict=True):
            self.finish_s[row] = t
            self.done_steps[row] = self.total_steps[row]
            self.is_active[row] = False
        done = set(rows)
        self.active_rows = [r for r in self.active_rows if r not in done]

    def columns(self) -> JobColumns:
        return JobColumns(
            self.specs, self.rates, self.total_steps, self.done_steps, self.attained_s
        )

    def records(self, type_names: tuple[str, ...]) -> tuple[JobRecord, ...]:
        out: list[JobRecord] = []
        for row, spec in enumerate(self.specs):
            reason = self.rejected.get(row, "")
            if reason:
                status = JobStatus.REJECTED
            elif not np.isnan(self.finish_s[row]):
                status = JobStatus.COMPLETED
            elif not np.isnan(self.start_s[row]):
                status = JobStatus.RUNNING
            else:
                status = JobStatus.QUEUED
            t = int(self.first_type[row])
            out.append(
                JobRecord(
                    job_id=spec.id,
                    name=spec.name,
                    job_type=spec.job_type,
                    arrival_s=spec.arrival_s,
                    start_s=float(self.start_s[row]),
                    finish_s=float(self.finish_s[row]),
                    num_gpu=spec.num_gpu,
                    gpu_milli=spec.gpu_milli,
                    status=status,
                    reason=reason,
                    gpu_model=type_names[t] if t >= 0 else "",
                    measured=self.measured[row],
                    gpu_milli_seconds=float(self.milli_s[row]),
                    alone_s=_alone_s(spec.work, float(self.rates[row, t])) if t >= 0 else np.nan,
                )
            )
        return tuple(out)


def _alone_s(work: float, rate: float) -> float:
    return work / rate if rate > 0 else float("nan")


def round_steps(
    rate: np.ndarray, jobs: JobStore, rows: np.ndarray, now: float, round_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """(finish time, steps) of each job this round: min(int(rate x round), remaining)."""
    whole = np.floor(rate * round_s)
    # A job slower than one step per round would never progress with int(): let it
    # run a fraction of a step instead (never happens with Gavel's table).
    per_round = np.where(whole >= 1.0, whole, rate * round_s)
    steps = np.minimum(per_round, jobs.total_steps[rows] - jobs.done_steps[rows])
    return now + steps / rate, steps
