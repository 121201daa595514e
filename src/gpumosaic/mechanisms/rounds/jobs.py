"""Per-job state of the round mechanism, in growable numpy arrays (row = arrival order).

One owner (``RoundDecider``) mutates it; rows never move, so other tables (entities,
leases) refer to jobs by row. Drivers read it (records, progress) and report progress
through the decider.
"""

from __future__ import annotations

import numpy as np

from gpumosaic.mechanisms.rounds.policy_input import JobColumns
from gpumosaic.model.job import JobSpec
from gpumosaic.policies.base import FloatArray

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
        self.job_id = np.zeros(_INITIAL_ROWS, dtype=np.int64)  # JobSpec.id by row
        self.is_active = np.zeros(_INITIAL_ROWS, dtype=bool)
        # What the policy reads of each spec, as columns (PolicyInput without a loop).
        self.scale = np.ones(_INITIAL_ROWS, dtype=np.int64)  # max(num_gpu, 1)
        self.gpu_demand = np.zeros(_INITIAL_ROWS)  # JobSpec.gpu_demand
        self.priority_weight = np.zeros(_INITIAL_ROWS)
        self.arrival_s = np.zeros(_INITIAL_ROWS)
        self.slo_s = np.full(_INITIAL_ROWS, np.nan)
        self.job_type: list[str] = []
        self.entity: list[str] = []
        self.rejected: dict[int, str] = {}  # row -> reason
        # Active rows in arrival order (a dict: a completion removes its row in O(1)).
        self._active: dict[int, None] = {}

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
            "job_id",
            "is_active",
            "scale",
            "gpu_demand",
            "priority_weight",
            "arrival_s",
            "slo_s",
        ):
            old = getattr(self, name)
            fill = (
                np.nan
                if name in ("start_s", "finish_s", "slo_s")
                else (-1 if name == "first_type" else 0)
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
        self.job_id[row] = spec.id
        self.scale[row] = max(spec.num_gpu, 1)
        self.gpu_demand[row] = spec.gpu_demand
        self.priority_weight[row] = spec.priority_weight
        self.arrival_s[row] = spec.arrival_s
        self.slo_s[row] = np.nan if spec.slo_s is None else spec.slo_s
        self.job_type.append(spec.job_type)
        self.entity.append(spec.entity)
        return row

    @property
    def active_rows(self) -> list[int]:
        """Rows of the active jobs, in arrival order."""
        return list(self._active)

    @property
    def n_active(self) -> int:
        return len(self._active)

    def activate(self, row: int) -> None:
        self.is_active[row] = True
        self._active[row] = None

    def reject(self, row: int, reason: str) -> None:
        self.rejected[row] = reason

    def complete(self, rows: list[int], finish: list[float]) -> None:
        for row, t in zip(rows, finish, strict=True):
            self.finish_s[row] = t
            self.done_steps[row] = self.total_steps[row]
            self.is_active[row] = False
            self._active.pop(row, None)

    def columns(self) -> JobColumns:
        return JobColumns(
            self.specs,
            self.rates,
            self.total_steps,
            self.done_steps,
            self.attained_s,
            self.job_id,
            self.job_type,
            self.entity,
            self.scale,
            self.gpu_demand,
            self.priority_weight,
            self.arrival_s,
            self.slo_s,
        )


def step_budget(
    rate: np.ndarray, total_steps: np.ndarray, done_steps: np.ndarray, round_s: float
) -> np.ndarray:
    """Steps a lease grants for one round: min(int(rate x round), remaining), as Gavel.

    A job slower than one step per round would never progress with int(): it gets a
    fraction of a step instead (never happens with Gavel's table).
    """
    whole = np.floor(rate * round_s)
    per_round = np.where(whole >= 1.0, whole, rate * round_s)
    return np.asarray(np.minimum(per_round, total_steps - done_steps), dtype=np.float64)
