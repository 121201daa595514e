"""Queue orders for the event-driven simulator: which pending job is tried first.

An order is the trivial "how much" policy of a non-preemptive scheduler: jobs start in
this order whenever the placement finds room. Registered by name like everything else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # a type only: validating a --policy name needs no numpy (model/)
    from gpumosaic.model.job import JobSpec

SortKey = tuple[float, float, int]


class QueueOrder(Protocol):
    @property
    def name(self) -> str: ...

    def key(self, job: JobSpec) -> SortKey: ...


@dataclass(frozen=True, slots=True)
class Fifo:
    """First come, first served (ties by job id)."""

    name: str = "fifo"

    def key(self, job: JobSpec) -> SortKey:
        return (job.arrival_s, 0.0, job.id)


@dataclass(frozen=True, slots=True)
class ShortestWorkFirst:
    """Least total work first: the classic SJF baseline (needs known durations)."""

    name: str = "sjf"

    def key(self, job: JobSpec) -> SortKey:
        return (job.work * max(job.num_gpu, 1), job.arrival_s, job.id)


@dataclass(frozen=True, slots=True)
class PriorityFifo:
    """Highest priority weight first, FIFO within a weight."""

    name: str = "priority"

    def key(self, job: JobSpec) -> SortKey:
        return (-job.priority_weight, job.arrival_s, job.id)


QUEUE_ORDERS: dict[str, type[Fifo] | type[ShortestWorkFirst] | type[PriorityFifo]] = {
    "fifo": Fifo,
    "sjf": ShortestWorkFirst,
    "priority": PriorityFifo,
}


def build_queue_order(name: str) -> QueueOrder:
    try:
        return QUEUE_ORDERS[name.strip().lower()]()
    except KeyError:
        known = ", ".join(QUEUE_ORDERS)
        raise ValueError(f"unknown queue order {name!r} (known: {known})") from None
