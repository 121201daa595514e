"""Per-job state of the round mechanism, in growable numpy arrays (row = arrival order).

One owner (``RoundDecider``) mutates it; rows never move, so other tables (entities,
leases) refer to jobs by row. Drivers read it (records, progress) and report progress
through the decider.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpumosaic.mechanisms.rounds.policy_input import JobColumns
from gpumosaic.model.job import JobSpec
from gpumosaic.results.outcome import Outcome, Rejection
from gpumosaic.types import FloatArray, IntArray

# Steps below this are a finished job (the arithmetic of float step counts).
STEP_EPS = 1e-6

_INITIAL_ROWS = 256

# What admission writes of each spec, as columns of two blocks (one write per block per
# batch of arrivals; the named columns are views into them).
_SPEC_FLOATS = ("total_steps", "gpu_demand", "priority_weight", "arrival_s", "slo_s")
_SPEC_INTS = ("demand_milli", "job_id", "scale")


class JobStore:
    def __init__(self, n_types: int) -> None:
        self.n_types = n_types
        self.specs: list[JobSpec] = []
        self.measured: list[bool] = []
        self.rates = np.zeros((_INITIAL_ROWS, n_types))
        self.done_steps = np.zeros(_INITIAL_ROWS)
        self.attained_s = np.zeros(_INITIAL_ROWS)  # GPU-seconds received
        self.milli_s = np.zeros(_INITIAL_ROWS)  # milli-GPU held x seconds
        self.start_s = np.full(_INITIAL_ROWS, np.nan)
        self.finish_s = np.full(_INITIAL_ROWS, np.nan)
        self.first_type = np.full(_INITIAL_ROWS, -1, dtype=np.int64)
        self.is_active = np.zeros(_INITIAL_ROWS, dtype=bool)
        self._spec_floats = np.zeros((_INITIAL_ROWS, len(_SPEC_FLOATS)))
        self._spec_ints = np.zeros((_INITIAL_ROWS, len(_SPEC_INTS)), dtype=np.int64)
        self._bind_spec_columns()
        self.job_type: list[str] = []
        self.entity: list[str] = []
        self.rejected: dict[int, Rejection] = {}  # row -> typed reason
        # row -> how a job left before its steps were done (live: failed, cancelled)
        self.withdrawn: dict[int, Outcome] = {}
        # Active rows in arrival order (a dict: a completion removes its row in O(1)).
        self._active: dict[int, None] = {}

    def _bind_spec_columns(self) -> None:
        floats, ints = self._spec_floats, self._spec_ints
        # Steps of the job (JobSpec.work).
        self.total_steps: FloatArray = floats[:, 0]
        # What the policy reads of each spec, as columns (PolicyInput without a loop).
        self.gpu_demand: FloatArray = floats[:, 1]  # JobSpec.gpu_demand
        self.priority_weight: FloatArray = floats[:, 2]
        self.arrival_s: FloatArray = floats[:, 3]
        self.slo_s: FloatArray = floats[:, 4]  # NaN: none
        self.demand_milli: IntArray = ints[:, 0]  # max(num_gpu, 1) x gpu_milli
        self.job_id: IntArray = ints[:, 1]  # JobSpec.id by row
        self.scale: IntArray = ints[:, 2]  # max(num_gpu, 1)

    def __len__(self) -> int:
        return len(self.specs)

    def _grow(self, rows: int) -> None:
        """Room for at least ``rows`` rows (capacity doubles until it fits)."""
        cap = len(self.done_steps)
        while cap < rows:
            cap *= 2
        for name in (
            "rates",
            "done_steps",
            "attained_s",
            "milli_s",
            "start_s",
            "finish_s",
            "first_type",
            "is_active",
            "_spec_floats",
            "_spec_ints",
        ):
            old = getattr(self, name)
            fill = (
                np.nan if name in ("start_s", "finish_s") else (-1 if name == "first_type" else 0)
            )
            new = np.full((cap, *old.shape[1:]), fill, dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)
        self._bind_spec_columns()

    def add_many(
        self, specs: Sequence[JobSpec], rates: FloatArray, measured: Sequence[bool]
    ) -> IntArray:
        """Jobs in arrival order with their (len(specs), n_types) rates; their rows."""
        first = len(self.specs)
        n = len(specs)
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        end = first + n
        if end > len(self.done_steps):
            self._grow(end)
        self.specs.extend(specs)
        self.measured.extend(bool(m) for m in measured)
        self.rates[first:end] = rates
        # Columns in the order of _SPEC_FLOATS and _SPEC_INTS. gpu_demand is
        # JobSpec.gpu_demand (a Python float, as it computes it).
        # numpy converts the rows straight into the blocks (no temporary array).
        self._spec_floats[first:end] = [
            (
                s.work,
                s.gpu_demand,
                s.priority_weight,
                s.arrival_s,
                np.nan if s.slo_s is None else s.slo_s,
            )
            for s in specs
        ]
        self._spec_ints[first:end] = [
            (max(s.num_gpu, 1) * s.gpu_milli, s.id, max(s.num_gpu, 1)) for s in specs
        ]
        self.job_type.extend([s.job_type for s in specs])
        self.entity.extend([s.entity for s in specs])
        return np.arange(first, end, dtype=np.int64)

    @property
    def active_rows(self) -> list[int]:
        """Rows of the active jobs, in arrival order."""
        return list(self._active)

    @property
    def n_active(self) -> int:
        return len(self._active)

    def activate_many(self, rows: IntArray | list[int]) -> None:
        """The rows become active, in the given order."""
        self.is_active[rows] = True
        self._active.update(dict.fromkeys(rows.tolist() if isinstance(rows, np.ndarray) else rows))

    def set_aside(self, row: int) -> None:
        """The row leaves the active jobs without an end (a live non-preemptible job
        running to its exit); ``activate_many`` brings it back."""
        self.is_active[row] = False
        self._active.pop(row, None)

    def reject(self, row: int, rejection: Rejection) -> None:
        self.rejected[row] = rejection

    def withdraw(self, row: int, left_s: float, outcome: Outcome) -> None:
        """The job left at ``left_s`` without doing its steps (``outcome``: failed or
        cancelled): no longer active, its steps stay as counted."""
        if outcome is Outcome.COMPLETED or not outcome.final:
            raise ValueError(f"a withdrawn job ends failed or cancelled, not {outcome.value}")
        self.finish_s[row] = left_s
        self.withdrawn[row] = outcome
        self.is_active[row] = False
        self._active.pop(row, None)

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
