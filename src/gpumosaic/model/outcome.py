"""How a job ends, as typed values every mechanism shares (no free text read back by prefix).

A job that arrived ends ``Outcome.COMPLETED``, ``Outcome.REJECTED`` (with a typed
``RejectReason``), or unfinished when the run stopped: ``RUNNING`` (holding GPUs),
``QUEUED`` (it had run, and was waiting again) or ``NEVER_STARTED`` (admitted, never
placed). Mechanisms decide rejections (``Rejection``: the reason and a detail for people);
drivers put the reason on each ``sim.result.JobRecord``; ``results/run_outcome.py``, the summary
and the per-job table read the type.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Outcome(StrEnum):
    COMPLETED = "completed"
    REJECTED = "rejected"
    RUNNING = "running"  # unfinished: held GPUs when the run stopped
    QUEUED = "queued"  # unfinished: had run, waiting again when the run stopped
    NEVER_STARTED = "never_started"  # unfinished: admitted, never placed

    @property
    def unfinished(self) -> bool:
        return self in _UNFINISHED


_UNFINISHED = frozenset({Outcome.RUNNING, Outcome.QUEUED, Outcome.NEVER_STARTED})


class RejectReason(StrEnum):
    """Why a mechanism refused a job for good. The value is the code users see."""

    NEVER_FITS = "never_fits"  # no node can hold it even with the cluster empty
    NO_THROUGHPUT = "no_throughput"  # no GPU model of the cluster gives it a speed
    CPU_ONLY = "cpu_only"  # it asks for no GPU and the mechanism schedules GPU jobs only
    # it fits only across servers, and the mechanism keeps a job on one (placement/admission)
    SPANS_SERVERS = "spans_servers"


@dataclass(frozen=True, slots=True)
class Rejection:
    reason: RejectReason
    detail: str  # for people: what it asked for and what the cluster has

    def __str__(self) -> str:
        return f"{self.reason.value}: {self.detail}"
