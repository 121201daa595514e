"""Per-job state of the round mechanism, in growable numpy arrays (row = arrival order).

One owner (``RoundDecider``) mutates it; rows never move, so other tables (entities,
leases) refer to jobs by row. Drivers read it (records, progress) and report progress
through the decider.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpumosaic.mechanisms.rounds.policy_input import JobColumns
from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.job import JobSpec
from gpumosaic.types import FloatArray, IntArray

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

    def _grow(self, rows: int) -> None:
        """Room for at least ``rows`` rows (capacity doubles until it fits)."""
        cap = len(self.total_steps)
        while cap < rows:
            cap *= 2
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
        """One job (``add_many`` of one)."""
        rows = self.add_many([spec], np.asarray(rates, dtype=np.float64)[None, :], [measured])
        return int(rows[0])

    def add_many(
        self, specs: Sequence[JobSpec], rates: FloatArray, measured: Sequence[bool]
    ) -> IntArray:
        """Jobs in arrival order with their (len(specs), n_types) rates; their rows."""
        first = len(self.specs)
        n = len(specs)
        end = first + n
        if end > len(self.total_steps):
            self._grow(end)
        new = slice(first, end)
        self.specs.extend(specs)
        self.measured.extend(bool(m) for m in measured)
        self.rates[new] = rates
        num_gpu = np.fromiter((s.num_gpu for s in specs), np.int64, n)
        milli = np.fromiter((s.gpu_milli for s in specs), np.int64, n)
        scale = np.maximum(num_gpu, 1)
        self.total_steps[new] = np.fromiter((s.work for s in specs), np.float64, n)
        self.demand_milli[new] = scale * milli
        self.job_id[new] = np.fromiter((s.id for s in specs), np.int64, n)
        self.scale[new] = scale
        # JobSpec.gpu_demand: num_gpu * gpu_milli / 1000, 0 without GPUs.
        self.gpu_demand[new] = np.where(num_gpu > 0, num_gpu * milli, 0) / MILLI_PER_GPU
        self.priority_weight[new] = np.fromiter((s.priority_weight for s in specs), np.float64, n)
        self.arrival_s[new] = np.fromiter((s.arrival_s for s in specs), np.float64, n)
        self.slo_s[new] = np.fromiter(
            (np.nan if s.slo_s is None else s.slo_s for s in specs), np.float64, n
        )
        self.job_type.extend(s.job_type for s in specs)
        self.entity.extend(s.entity for s in specs)
        return np.arange(first, end, dtype=np.int64)

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

    def activate_many(self, rows: IntArray) -> None:
        """``activate`` each row, in the given order."""
        self.is_active[rows] = True
        self._active.update(dict.fromkeys(rows.tolist()))

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
