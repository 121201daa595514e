"""What Gandiva did, counted the same way on both sides of ``sim-vs-live --mechanism
gandiva``: suspensions, migrations and packs (``ActionCounts``), from the simulator's
steps (``Tally``, its ``on_step``) or the live driver's counters."""

from __future__ import annotations

from dataclasses import dataclass

from gpumosaic.mechanisms.gandiva import Migrate, Pack, Step, Suspend, Unpack


@dataclass(frozen=True, slots=True)
class ActionCounts:
    """What Gandiva did, counted the same way on both sides: ``suspensions`` (Suspend and
    Unpack actions: a running job stopped without finishing), ``migrations`` (Migrate
    actions, within or across servers), ``packs`` (Pack actions: pairs tried)."""

    suspensions: int = 0
    migrations: int = 0
    packs: int = 0

    def to_json(self) -> dict[str, int]:
        return {"suspensions": self.suspensions, "migrations": self.migrations, "packs": self.packs}


class Tally:
    """Counts a simulator's steps (its ``on_step``)."""

    def __init__(self) -> None:
        self.suspensions = self.migrations = self.packs = 0

    def __call__(self, _now: float, step: Step) -> None:
        for action in step.actions:
            if isinstance(action, Suspend | Unpack):
                self.suspensions += 1
            elif isinstance(action, Migrate):
                self.migrations += 1
            elif isinstance(action, Pack):
                self.packs += 1

    def counts(self) -> ActionCounts:
        return ActionCounts(self.suspensions, self.migrations, self.packs)
