"""Where an entity runs: the value a scheduler's plan hands its executor (a round's entry
under Gavel's rounds, a start or resume under Gandiva) and the live runtime launches."""

from __future__ import annotations

from dataclasses import dataclass

from gpumosaic.model.state import Assignment


@dataclass(frozen=True, slots=True)
class PlannedEntity:
    """One entity (a job, or a packed pair) that runs this round, and where."""

    job_ids: tuple[int, ...]  # one id, or two for a packed pair
    gpu_type: str
    parts: tuple[Assignment, ...]  # node, GPU indices and milli per GPU (several: a gang)
    extended: bool  # the entity keeps last round's GPUs (no restart)
    steps: tuple[float, ...]  # steps granted to each member for the round
    rates: tuple[float, ...]  # each member's planned steps/s on this type
