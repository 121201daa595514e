"""How a job ends, as typed values every mechanism and every live service shares (no free
text read back by prefix).

A job that arrived ends ``Outcome.COMPLETED``, ``Outcome.FAILED`` (its process failed
past its retries: live only), ``Outcome.CANCELLED`` (by its user: live only),
``Outcome.REJECTED`` (with a typed ``RejectReason``), or unfinished when the run stopped:
``RUNNING`` (holding GPUs), ``QUEUED`` (it had run, and was waiting again) or
``NEVER_STARTED`` (admitted, never placed). ``JobEnd`` is the outcome with its reason,
one value. Mechanisms decide rejections (``Rejection``: the reason and a detail for
people); drivers put the reason on each ``results.result.JobRecord``; ``run_outcome``,
the summary and the per-job table read the type.

This lives in results/, not model/: it is what a run produced, read by the summary and
the tables; the mechanisms (below results) decide it, and nothing above results uses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Outcome(StrEnum):
    COMPLETED = "completed"
    FAILED = "failed"  # live: its process failed past its retries
    CANCELLED = "cancelled"  # live: its user cancelled it
    REJECTED = "rejected"
    RUNNING = "running"  # unfinished: held GPUs when the run stopped
    QUEUED = "queued"  # unfinished: had run, waiting again when the run stopped
    NEVER_STARTED = "never_started"  # unfinished: admitted, never placed

    @property
    def unfinished(self) -> bool:
        return self in _UNFINISHED

    @property
    def final(self) -> bool:
        """The job will never run again (completed, failed, cancelled, rejected)."""
        return not self.unfinished


_UNFINISHED = frozenset({Outcome.RUNNING, Outcome.QUEUED, Outcome.NEVER_STARTED})


class RejectReason(StrEnum):
    """Why a mechanism refused a job for good. The value is the code users see."""

    NEVER_FITS = "never_fits"  # no node can hold it even with the cluster empty
    NO_THROUGHPUT = "no_throughput"  # no GPU model of the cluster gives it a speed
    CPU_ONLY = "cpu_only"  # it asks for no GPU and the mechanism schedules GPU jobs only
    # it fits only across servers, and the mechanism keeps a job on one (mechanisms/admission.py)
    SPANS_SERVERS = "spans_servers"


@dataclass(frozen=True, slots=True)
class Rejection:
    reason: RejectReason
    detail: str  # for people: what it asked for and what the cluster has

    def __str__(self) -> str:
        return f"{self.reason.value}: {self.detail}"


class JobEndError(ValueError):
    """A ``JobEnd`` whose parts disagree (a rejection without its reason, or a reason on
    a job that was not rejected)."""


@dataclass(frozen=True, slots=True)
class JobEnd:
    """How one job ended (or stood, if unfinished), status and reason together: a
    rejected job has its typed ``rejection``, no other has one; ``detail`` says it in
    words (why it failed, who cancelled it, what it asked for), "" when nothing to say."""

    outcome: Outcome
    rejection: RejectReason | None = None
    detail: str = ""

    def __post_init__(self) -> None:
        rejected = self.outcome is Outcome.REJECTED
        if rejected and self.rejection is None:
            raise JobEndError("a rejected job's end needs its RejectReason")
        if not rejected and self.rejection is not None:
            raise JobEndError(f"a {self.outcome.value} job has no RejectReason")

    @classmethod
    def rejected(cls, rejection: Rejection) -> JobEnd:
        return cls(Outcome.REJECTED, rejection.reason, rejection.detail)

    @property
    def final(self) -> bool:
        return self.outcome.final

    @property
    def words(self) -> str:
        """The reason as people read it (a rejection: ``code: detail``, as ``Rejection``)."""
        if self.rejection is not None:
            return f"{self.rejection.value}: {self.detail}"
        return self.detail
