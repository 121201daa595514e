"""A small, domain-free discrete-event engine in the spirit of SimPy's core.

Events sit in a heap keyed by (time, priority, sequence): equal times run in priority
order, then in the order they were scheduled, so a run is fully deterministic. The
sequence counter belongs to the engine instance: no global state.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Handler = Callable[[], Any]


@dataclass(slots=True)
class _Entry:
    time: float
    priority: int
    sequence: int
    handler: Handler
    cancelled: bool = False


# The heap holds (time, priority, sequence, entry) tuples: tuples compare in C, and the
# unique sequence means the entry itself is never compared.
_Item = tuple[float, int, int, _Entry]


class EventHandle:
    """Returned by ``schedule``; lets the owner cancel an event that has not fired."""

    __slots__ = ("_entry",)

    def __init__(self, entry: _Entry) -> None:
        self._entry = entry

    @property
    def time(self) -> float:
        return self._entry.time

    def cancel(self) -> None:
        self._entry.cancelled = True

    @property
    def cancelled(self) -> bool:
        return self._entry.cancelled


class Engine:
    """Run handlers at simulated times. ``now`` only moves forward."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self._heap: list[_Item] = []
        self._sequence = 0
        self.events_processed = 0

    def schedule(self, time: float, handler: Handler, priority: int = 0) -> EventHandle:
        if time < self.now:
            raise ValueError(f"cannot schedule at {time} before now={self.now}")
        entry = _Entry(time, priority, self._sequence, handler)
        self._sequence += 1
        heapq.heappush(self._heap, (time, priority, entry.sequence, entry))
        return EventHandle(entry)

    def peek(self) -> float:
        """Time of the next live event, or +inf when none is left."""
        while self._heap and self._heap[0][3].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else float("inf")

    def step(self) -> bool:
        """Run the next live event; False when the queue is empty."""
        while self._heap:
            entry = heapq.heappop(self._heap)[3]
            if entry.cancelled:
                continue
            self.now = entry.time
            self.events_processed += 1
            entry.handler()
            return True
        return False

    def run(self, until: float = float("inf")) -> None:
        """Run events with time <= ``until``."""
        while (next_time := self.peek()) <= until and next_time != float("inf"):
            self.step()
        if until != float("inf"):
            self.now = max(self.now, until)

    def __len__(self) -> int:
        return sum(not item[3].cancelled for item in self._heap)
