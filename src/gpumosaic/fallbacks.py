"""Fallbacks: every time a run did something other than what was asked, counted by kind.

A fallback is never silent: policies, sharing models and mechanisms count them in a
``Fallbacks`` value, a run adds them up (``SimResult.fallbacks``), the summary and
``--json`` report them under ``fallbacks`` (counts by kind) and the CLI names them in
one warning line on stderr.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum


class Fallback(Enum):
    POLICY_SOLVE_FAILED = "policy_solve_failed"  # an LP/MILP failed: a fallback allocation
    SOLVE_INACCURATE = "solve_inaccurate"  # the solver returned optimal_inaccurate
    SLOS_DROPPED = "slos_dropped"  # SLO constraints infeasible: solved without them
    SLO_JOBS_LEFT_OUT = "slo_jobs_left_out"  # jobs already past their deadline left out
    UNMEASURED_PAIR = "unmeasured_pair"  # interference: no measured rate, parametric used
    PLACEMENT_FAILED = "placement_failed"  # an entity chosen for a round found no GPUs
    PACKED_RATES_MISSING = "packed_rates_missing"  # a packing policy solved without pairs

    @property
    def text(self) -> str:
        return _TEXT[self]


_TEXT = {
    Fallback.POLICY_SOLVE_FAILED: "policy solve failed, fallback allocation used",
    Fallback.SOLVE_INACCURATE: "solver answer only optimal_inaccurate",
    Fallback.SLOS_DROPPED: "SLOs infeasible, solved without them",
    Fallback.SLO_JOBS_LEFT_OUT: "jobs past their SLO deadline left out of the SLO solve",
    Fallback.UNMEASURED_PAIR: "co-located jobs not measured, parametric interference used",
    Fallback.PLACEMENT_FAILED: "job chosen for a round found no GPUs",
    Fallback.PACKED_RATES_MISSING: (
        "packing policy solved without pairs: a GPU model has no measured packed rates"
    ),
}


# What a user can change when a kind of fallback shows up (the warning says it).
_ADVICE = {
    Fallback.POLICY_SOLVE_FAILED: "another --policy, or fewer jobs per round, avoids it",
    Fallback.SOLVE_INACCURATE: "usually harmless; another --policy avoids it",
    Fallback.SLOS_DROPPED: "loosen the jobs' slo_s, or add GPUs",
    Fallback.SLO_JOBS_LEFT_OUT: "loosen the jobs' slo_s, or add GPUs",
    Fallback.UNMEASURED_PAIR: (
        "--sharing parametric models every pair alike; a policy without packing avoids pairs"
    ),
    Fallback.PLACEMENT_FAILED: (
        "the policy gave more jobs GPUs than the placement could fit (partly free or "
        "scattered GPUs); try --placement bestfit or fgd, --gpus-per-node to match the "
        "jobs' GPU counts, or a lower arrival rate"
    ),
    Fallback.PACKED_RATES_MISSING: (
        "use a _perf policy, or a cluster of measured models (V100, P100, K80)"
    ),
}


@dataclass(frozen=True, slots=True)
class Fallbacks:
    """Counts by kind (kinds with 0 left out), in ``Fallback`` order."""

    counts: tuple[tuple[Fallback, int], ...] = ()

    @classmethod
    def of(cls, kind: Fallback, count: int = 1) -> Fallbacks:
        return cls(((kind, count),)) if count > 0 else cls()

    @classmethod
    def total(cls, parts: Iterable[Fallbacks]) -> Fallbacks:
        summed: dict[Fallback, int] = {}
        for part in parts:
            for kind, count in part.counts:
                summed[kind] = summed.get(kind, 0) + count
        return cls(tuple((k, summed[k]) for k in Fallback if summed.get(k, 0) > 0))

    def __add__(self, other: Fallbacks) -> Fallbacks:
        return Fallbacks.total((self, other))

    def __bool__(self) -> bool:
        return bool(self.counts)

    def count(self, kind: Fallback) -> int:
        return dict(self.counts).get(kind, 0)

    def to_json(self) -> dict[str, int]:
        return {kind.value: count for kind, count in self.counts}

    def warning(self) -> str:
        """One line naming every kind, e.g. for stderr; empty when there was none."""
        if not self.counts:
            return ""
        parts = [
            f"{count} x {kind.text} ({kind.value}; to change: {_ADVICE[kind]})"
            for kind, count in self.counts
        ]
        return "fallbacks: " + "; ".join(parts)
