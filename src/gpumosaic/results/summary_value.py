"""The run summary's value (``summary.summarize`` computes it), plain Python: a study
file's metric names are checked against its fields before numpy loads."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpumosaic.fallbacks import Fallbacks


@dataclass(frozen=True, slots=True)
class Summary:
    jobs: int
    completed: int
    running: int
    queued: int  # unfinished jobs waiting when the run stopped (never_started included)
    rejected: int
    unfinished: int  # running + queued: arrived, neither completed nor rejected
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
