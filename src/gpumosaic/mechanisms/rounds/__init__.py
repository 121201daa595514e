"""Gavel's rounds, one package: the clock-free ``RoundDecider`` (``decision`` and the
modules it draws on: ``allocation``, ``priorities``, ``placing``, ``leases``,
``estimation``, the kernels), its simulated driver (``sim``), its wall-clock driver over
the live runtime (``live``), its ``/ui`` view (``ui``) and its plug-in (``plugin``).

The names load on first use (PEP 562): the plug-in is imported to validate every run
description, and a user mistake's one line must not pay for the decider's numpy."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpumosaic.lazy import lazy_names

if TYPE_CHECKING:
    from gpumosaic.mechanisms.rounds.decision import (
        RoundConfig,
        RoundDecider,
        RoundPlan,
        RoundReport,
    )
    from gpumosaic.model.plan import PlannedEntity

__getattr__ = lazy_names(
    __name__,
    dict.fromkeys(
        ("PlannedEntity", "RoundConfig", "RoundDecider", "RoundPlan", "RoundReport"), "decision"
    ),
)

__all__ = ["PlannedEntity", "RoundConfig", "RoundDecider", "RoundPlan", "RoundReport"]
