"""Gavel's "force a solve when nothing runs", one rule for the simulated and the live
round drivers: when a round's plan is empty, jobs are still active and nothing is on its
way that could change that (no arrival ahead in a simulation, no live process in a
service), the allocation in force leaves the cluster idle; the driver solves the policy
once more at that time (never twice at one time: a solve that still plans nothing means
nothing can run)."""

from __future__ import annotations

from gpumosaic.mechanisms.rounds.decision import RoundDecider, RoundPlan


def force_solve_due(
    decider: RoundDecider, plan: RoundPlan, now: float, *, waiting: bool, forced_at: float
) -> bool:
    """Whether the driver must force a solve now. ``waiting``: something is on its way
    that may change the plan (an arrival, a live process); ``forced_at``: when it last
    forced one (NaN: never)."""
    return not len(plan) and decider.has_active_jobs and not waiting and forced_at != now
