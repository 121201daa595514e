"""The run summary's value (``summary.summarize`` computes it), plain Python: a study
file's metric names are checked against its fields before numpy loads."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from gpumosaic.fallbacks import Fallback, Fallbacks


@dataclass(frozen=True, slots=True)
class Summary:
    jobs: int
    completed: int
    running: int
    queued: int  # unfinished jobs waiting when the run stopped (never_started included)
    rejected: int
    failed: int  # live only: its process failed past its retries
    cancelled: int  # live only: cancelled by its user
    unfinished: int  # running + queued: arrived, not final (completed, failed, cancelled, rejected)
    never_started: int  # unfinished jobs that never ran
    measured_jobs: int
    avg_jct_s: float
    p50_jct_s: float
    p95_jct_s: float
    p99_jct_s: float
    avg_queueing_s: float
    makespan_s: float
    utilization: float
    fragmentation_rate_mean: float
    energy_kwh: float
    avg_slowdown: float
    slowdown_p99: float
    slowdown_max: float
    ftf_rho_mean: float  # finish-time fairness (results/fairness.py)
    ftf_rho_max: float
    jain_index: float
    suspended_s: float  # summed over jobs: waiting for a GPU they hold a share of
    thrashing_s: float
    handovers: int
    migrations: int
    rounds: int
    policy_solves: int
    policy_solve_s: float
    events: int
    elapsed_s: float
    fallbacks: Fallbacks = field(default_factory=Fallbacks)

    def to_json(self) -> dict[str, float | int | None]:
        """JSON-safe dict: NaN (no completed job, no sample) becomes null."""
        out: dict[str, float | int | None] = {}
        for key in self.__dataclass_fields__:
            value = getattr(self, key)
            if key == "fallbacks":
                continue
            out[key] = None if isinstance(value, float) and math.isnan(value) else value
        out["fallbacks"] = self.fallbacks.to_json()  # type: ignore[assignment]
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Summary:
        """``to_json``'s inverse (null back to NaN), checked: a key missing or of the
        wrong type is a ``ValueError`` naming it (an answer from another version)."""
        values: dict[str, object] = {}
        for f in fields(cls):
            if f.name == "fallbacks":
                continue
            if f.name not in data:
                raise ValueError(f"no {f.name!r} in the summary")
            value = data[f.name]
            if f.type == "int" and (not isinstance(value, int) or isinstance(value, bool)):
                raise ValueError(f"{f.name!r} is {value!r}, not a count")
            if f.type == "float":
                if value is None:
                    value = math.nan
                elif not isinstance(value, int | float) or isinstance(value, bool):
                    raise ValueError(f"{f.name!r} is {value!r}, not a number")
                value = float(value)
            values[f.name] = value
        counts = data.get("fallbacks") or {}
        if not isinstance(counts, Mapping):
            raise ValueError(f"'fallbacks' is {counts!r}, not an object")
        kinds = {kind.value: kind for kind in Fallback}
        parsed = []
        for kind, count in counts.items():
            if kind not in kinds or not isinstance(count, int):
                raise ValueError(f"'fallbacks' has {kind!r}: {count!r}")
            parsed.append((kinds[kind], count))
        fallbacks = Fallbacks.total(Fallbacks.of(kind, count) for kind, count in parsed)
        return cls(**values, fallbacks=fallbacks)  # type: ignore[arg-type]
