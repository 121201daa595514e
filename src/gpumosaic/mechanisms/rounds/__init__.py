"""Gavel's round mechanism without a clock: ``RoundDecider`` (see ``decision``)."""

from gpumosaic.mechanisms.rounds.decision import (
    PlannedEntity,
    RoundConfig,
    RoundDecider,
    RoundPlan,
    RoundReport,
)

__all__ = ["PlannedEntity", "RoundConfig", "RoundDecider", "RoundPlan", "RoundReport"]
