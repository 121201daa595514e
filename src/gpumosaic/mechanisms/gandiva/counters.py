"""What Gandiva did during a run, counted: one frozen value, summed by the decider."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True, slots=True)
class GandivaCounters:
    """Counts of Gandiva's actions. Steps return the counts of what they did and the
    decider adds them up (``counters + step``); nothing else keeps a count."""

    migrations: int = 0  # jobs moved to another server (a set of n jobs counts n)
    defragmentations: int = 0  # migrations started to free a whole GPU set for a job
    spread_moves: int = 0  # waiting jobs moved onto GPUs that became free
    packs_tried: int = 0  # pairs put on trial
    packs_kept: int = 0  # trials that beat time-slicing
    packs_undone: int = 0  # trials that did not

    def __add__(self, other: GandivaCounters) -> GandivaCounters:
        if not other:
            return self
        return GandivaCounters(
            self.migrations + other.migrations,
            self.defragmentations + other.defragmentations,
            self.spread_moves + other.spread_moves,
            self.packs_tried + other.packs_tried,
            self.packs_kept + other.packs_kept,
            self.packs_undone + other.packs_undone,
        )

    def __bool__(self) -> bool:
        """True when anything was counted (adding an empty value is free)."""
        return any(getattr(self, f.name) for f in fields(self))
