"""What one run of a study stores: its point, its metrics, its description and its
tables (``RunProduct``), and the x axis its timeline is drawn against. The result store
(``store``) writes it, the study kinds make it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

# The x axis of a run's timeline and placements: simulated seconds, or (fill replays)
# the arrived workload in % of the cluster's GPUs.
TIME_AXIS = "time_s"
ARRIVED_AXIS = "arrived_pct"


@dataclass(frozen=True, slots=True)
class NamedTable:
    name: str  # jobs | timeline | placements
    table: pa.Table


@dataclass(frozen=True, slots=True)
class RunProduct:
    point: Any  # the kind's point dataclass
    metrics: Any  # a frozen dataclass of numbers
    description: dict[str, Any]  # the run description, stored beside the tables as JSON
    tables: tuple[NamedTable, ...] = ()
    axis: str = TIME_AXIS
    notes: tuple[str, ...] = ()  # fallbacks and rejections worth a line in the report
