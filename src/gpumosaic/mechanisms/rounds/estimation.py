"""Throughput estimation (Gavel, OSDI'20 section 5) for the round decider.

``ThroughputEstimation`` is a part of ``RoundDecider`` (clock-free, like the decider):
the simulator and the live service drive the same object, and differ only in what a
*measurement* is (the simulator: the table's true rate of the job on the model it ran a
round on; live: the rate its lease reports, already an EMA with alpha 0.5 in the
service's meter, as Gavel refines its estimates).

A job admitted with unknown rates (NaN entries of its rate row) is *profiled*: until it
has measured ``profile_models`` of the GPU models it may use (default: every one), the
time the policy allocates it is moved, at each solve, to the models it has not measured
(``profile_entities``), so it is given rounds there, and every measurement of a
profiling job asks for a solve at the next round. Its rates on the models it has not
measured are estimated by matrix completion against Gavel's reference jobs (the table's
job types at its scale factor, its own type left out: leave-one-out when a simulated
run hides the table from the decider) from its measured entries
(``workloads.estimation.estimate_rates``): before any measurement the reference jobs'
typical row, then the row through each measured entry. A measurement replaces the
estimate for its model and re-estimates the rest of the row.

The component counts what it did (``EstimationReport``): jobs profiled, rounds given to
profiling, entries it estimated, and, for every estimate later replaced by a
measurement, the relative error of the estimate (estimates made from at least one
measurement; the typical-row prior is counted apart).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from gpumosaic.mechanisms.rounds.priorities import EntityTable
from gpumosaic.model.gpu import GpuModel
from gpumosaic.model.job import JobSpec
from gpumosaic.types import FloatArray, IntArray
from gpumosaic.workloads.estimation import estimate_rates
from gpumosaic.workloads.throughputs import GavelThroughputTable

# Reference rows needed at a scale factor before it is used; below it, scale 1's rows
# (the job's level is taken from its own measurements either way).
_MIN_REFERENCE_ROWS = 3


@dataclass(frozen=True, slots=True)
class EstimationConfig:
    """``profile_models``: models a job with unknown rates is profiled on before its
    other rates are left to the estimator (None: every model it may use). ``rank``: the
    completion's rank (``workloads.estimation.complete_matrix``)."""

    profile_models: int | None = None
    # Rank 1: on Gavel's table with the cluster's 3 models as columns, the best of 0-2 at
    # predicting the third model from two measured (leave-one-type-out, scale 1: median
    # error 0.22 vs 0.25); from one measured model all ranks give the same row.
    rank: int = 1

    def __post_init__(self) -> None:
        if self.profile_models is not None and self.profile_models < 1:
            raise ValueError("profile_models must be >= 1 (or None: every model)")
        if self.rank < 0:
            raise ValueError("rank must be >= 0")


@dataclass(frozen=True, slots=True)
class EstimationReport:
    """What the estimation did in a run (``simulate --json`` key ``estimation``; live
    ``/metrics`` ``estimation_*``)."""

    profiled_jobs: int  # jobs admitted with at least one unknown rate
    profiling_rounds: int  # (job, round) placements on a model the job had not measured
    estimated_entries: int  # (job, model) rates the estimator filled at admission
    still_estimated: int  # of those, never measured (the estimate stood to the end)
    checked_estimates: int  # estimates from >= 1 measurement, later measured
    estimate_error_median: float  # |estimate - measured| / measured over those (NaN: none)
    estimate_error_max: float

    def to_json(self) -> dict[str, float | int | None]:
        out: dict[str, float | int | None] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            out[name] = None if isinstance(value, float) and math.isnan(value) else value
        return out


@dataclass(slots=True)
class _Profile:
    """One job with unknown rates (mutable; owned by ``ThroughputEstimation``)."""

    job_type: str
    scale: int
    usable: np.ndarray  # bool (T,): models it may use (rate not 0)
    unknown: np.ndarray  # bool (T,): entries it came without
    measured: np.ndarray  # bool (T,)
    belief: np.ndarray  # (T,) measured or estimated steps/s
    from_measurements: bool = False  # the estimates rest on >= 1 measurement
    profiling: bool = True


@dataclass(slots=True)
class _Counts:
    profiling_rounds: int = 0
    estimated_entries: int = 0
    errors: list[float] = field(default_factory=list)


class ThroughputEstimation:
    """See the module doc. ``models``: the cluster's GPU models (the decider's types, in
    order); ``table``: the reference rates (Gavel's table)."""

    def __init__(
        self,
        models: Sequence[GpuModel],
        table: GavelThroughputTable,
        config: EstimationConfig | None = None,
    ) -> None:
        self.config = config or EstimationConfig()
        self.models = tuple(models)
        self.table = table
        self.columns = tuple(table.column(m) for m in self.models)  # (key, factor)
        self._references: dict[tuple[int, str], FloatArray] = {}
        self._profiles: dict[int, _Profile] = {}  # job row -> its profile
        self._profiling: set[int] = set()
        self._counts = _Counts()
        # A profiling job measured a model it was profiled on: solve at the next round.
        self.solve_wanted = False

    # ---- admission -------------------------------------------------------------------

    def admit(self, first_row: int, specs: Sequence[JobSpec], rates: FloatArray) -> FloatArray:
        """Rates of jobs about to take rows ``first_row``.. with their NaN entries
        (unknown) estimated; the jobs with any start being profiled."""
        unknown_rows = np.isnan(rates).any(axis=1)
        if not unknown_rows.any():
            return rates
        rates = np.array(rates, dtype=np.float64)
        for i in np.flatnonzero(unknown_rows).tolist():
            spec = specs[i]
            row_rates = rates[i]
            unknown = np.isnan(row_rates)
            profile = _Profile(
                job_type=spec.job_type,
                scale=max(spec.num_gpu, 1),
                usable=unknown | (row_rates > 0),
                unknown=unknown,
                measured=~unknown & (row_rates > 0),
                belief=np.where(unknown, np.nan, row_rates),
            )
            profile.from_measurements = bool(profile.measured.any())
            self._estimate(profile)
            profile.profiling = self._still_profiling(profile)
            row = first_row + i
            self._profiles[row] = profile
            if profile.profiling:
                self._profiling.add(row)
            self._counts.estimated_entries += int(unknown.sum())
            rates[i] = profile.belief
        return rates

    def drop(self, row: int) -> None:
        """A job the decider rejected at admission: never run, so neither profiled nor
        estimated."""
        profile = self._profiles.pop(row, None)
        if profile is not None:
            self._profiling.discard(row)
            self._counts.estimated_entries -= int(profile.unknown.sum())

    def _reference(self, scale: int, job_type: str) -> FloatArray:
        """Isolated rates of the table's other job types on the cluster's models."""
        if job_type not in self.table.job_types:
            job_type = ""  # every type: one entry for all unknown names (a bounded cache)
        key = (scale, job_type)
        ref = self._references.get(key)
        if ref is None:
            table = self.table
            types = [jt for jt in table.job_types if jt != job_type and self._has_row(jt, scale)]
            if len(types) < _MIN_REFERENCE_ROWS and scale != 1:
                return self._reference(1, job_type)
            ref = np.full((len(types), len(self.models)), np.nan)
            for r, jt in enumerate(types):
                for t, (column, factor) in enumerate(self.columns):
                    if column is not None and table.has(jt, scale, column):
                        rate = factor * table.isolated(jt, scale, column)
                        if rate > 0:  # 0: the type does not run there (not a rate)
                            ref[r, t] = rate
            self._references[key] = ref
        return ref

    def _has_row(self, job_type: str, scale: int) -> bool:
        return any(
            column is not None and self.table.has(job_type, scale, column)
            for column, _ in self.columns
        )

    def _estimate(self, profile: _Profile) -> None:
        """The unmeasured usable entries from the measured ones."""
        todo = profile.usable & ~profile.measured
        if not todo.any():
            return
        ref = self._reference(profile.scale, profile.job_type)
        partial = np.where(profile.measured, profile.belief, np.nan)
        if ref.shape[0] == 0 or not np.isfinite(ref).any():
            # No reference at all: the measured level (or 1 step/s) on every model.
            level = float(np.nanmedian(partial)) if profile.measured.any() else 1.0
            estimate = np.full(len(partial), level)
        else:
            estimate = estimate_rates(ref, partial, self.config.rank)
        profile.belief = np.where(todo, estimate, np.where(profile.usable, profile.belief, 0.0))

    def _still_profiling(self, profile: _Profile) -> bool:
        usable = int(profile.usable.sum())
        goal = usable if self.config.profile_models is None else self.config.profile_models
        left = profile.usable & ~profile.measured
        return bool(left.any()) and int((profile.measured & profile.usable).sum()) < min(
            goal, usable
        )

    # ---- measurements ----------------------------------------------------------------

    def observe(self, row: int, type_index: int, steps_per_s: float) -> FloatArray | None:
        """A measured rate of ``row`` on ``type_index``: the job's new rate row, or None
        for a job the estimation does not track (its rates were known)."""
        profile = self._profiles.get(row)
        if profile is None:
            return None
        if not profile.measured[type_index]:
            guess = float(profile.belief[type_index])
            if profile.from_measurements and guess > 0:
                self._counts.errors.append(abs(guess - steps_per_s) / steps_per_s)
            profile.measured[type_index] = True
            profile.usable[type_index] = True
        profile.belief[type_index] = steps_per_s
        profile.from_measurements = True
        self._estimate(profile)
        was = profile.profiling
        profile.profiling = self._still_profiling(profile)
        if row in self._profiling:
            # What the policy sees of it changed (its mask, or its end): solve.
            self.solve_wanted = True
            if not profile.profiling:
                self._profiling.discard(row)
        elif was != profile.profiling:
            self.solve_wanted = True
        return np.array(profile.belief)

    # ---- what the decider asks -------------------------------------------------------

    def profile_entities(self, table: EntityTable) -> EntityTable:
        """The allocation's entity table with each profiling job's time moved to the
        models it has not measured: its allocation's total, split evenly over them, and
        rate 0 (not runnable) on the models it has measured. The policy decides how much
        time a job gets; profiling decides where, whatever the policy (one that keeps a
        job on its model, like FIFO, would otherwise never move it)."""
        profiling = self._profiling
        if not profiling:
            return table
        rows = table.rows_a.tolist()
        hit = [
            e for e, (r, b) in enumerate(zip(rows, table.rows_b.tolist(), strict=True))
            if b < 0 and r in profiling
        ]  # fmt: skip
        if not hit:
            return table
        x, rate_a = table.x.copy(), table.rate_a.copy()
        for e in hit:
            profile = self._profiles[rows[e]]
            target = profile.usable & ~profile.measured & (rate_a[e] > 0)
            if not target.any():
                continue
            total = float(x[e].sum())
            x[e] = np.where(target, total / int(target.sum()), 0.0)
            rate_a[e, ~target] = 0.0
        return replace(table, x=x, rate_a=rate_a)

    def solved(self) -> None:
        self.solve_wanted = False

    def note_plan(self, rows_a: IntArray, rows_b: IntArray, type_index: IntArray) -> None:
        """Count the plan's placements of profiling jobs on models they have not measured
        (pairs are jobs with known rates: not profiled)."""
        profiling = self._profiling
        if not profiling:
            return
        for r, b, t in zip(rows_a.tolist(), rows_b.tolist(), type_index.tolist(), strict=True):
            if b < 0 and r in profiling and not self._profiles[r].measured[t]:
                self._counts.profiling_rounds += 1

    def is_profiling(self, row: int) -> bool:
        return row in self._profiling

    def estimated(self, row: int) -> np.ndarray | None:
        """bool (T,): the row's entries that are estimates now (None: not tracked)."""
        profile = self._profiles.get(row)
        if profile is None:
            return None
        estimated: np.ndarray = profile.usable & ~profile.measured
        return estimated

    def report(self) -> EstimationReport:
        c = self._counts
        errors = np.array(c.errors)
        profiles = self._profiles.values()
        still = sum(int((p.unknown & ~p.measured & p.usable).sum()) for p in profiles)
        return EstimationReport(
            profiled_jobs=len(self._profiles),
            profiling_rounds=c.profiling_rounds,
            estimated_entries=c.estimated_entries,
            still_estimated=still,
            checked_estimates=len(errors),
            estimate_error_median=float(np.median(errors)) if len(errors) else math.nan,
            estimate_error_max=float(errors.max()) if len(errors) else math.nan,
        )
