"""A live job's state as the store and the API spell it, to and from its typed end
(``results.outcome.JobEnd``). The spellings are an interface (state files, the API's
JSON, ``jobs --state``) and stay as they were: ``done`` is ``Outcome.COMPLETED``; a
``queued`` job is ``Outcome.QUEUED`` once it has run, ``Outcome.NEVER_STARTED`` before.
"""

from __future__ import annotations

from gpumosaic.results.outcome import JobEnd, Outcome, RejectReason

JOB_STATES = ("queued", "running", "done", "failed", "cancelled", "rejected")

_STATE_OF = {
    Outcome.COMPLETED: "done",
    Outcome.FAILED: "failed",
    Outcome.CANCELLED: "cancelled",
    Outcome.REJECTED: "rejected",
    Outcome.RUNNING: "running",
    Outcome.QUEUED: "queued",
    Outcome.NEVER_STARTED: "queued",
}
_OUTCOME_OF = {
    "done": Outcome.COMPLETED,
    "failed": Outcome.FAILED,
    "cancelled": Outcome.CANCELLED,
    "rejected": Outcome.REJECTED,
    "running": Outcome.RUNNING,
}

TERMINAL_STATES = frozenset(_STATE_OF[o] for o in Outcome if o.final)

CANCELLED_BY_USER = JobEnd(Outcome.CANCELLED, None, "cancelled by the user")


class UnknownJobStateError(ValueError):
    """A state the store never writes (a state file from elsewhere)."""


def store_state(end: JobEnd) -> str:
    """The store's spelling of ``end``."""
    return _STATE_OF[end.outcome]


def rejection_code(end: JobEnd) -> str:
    """What the store keeps of a rejection's reason: its code ("" for any other end)."""
    return "" if end.rejection is None else end.rejection.value


def job_end(state: str, reason: str, rejection: str, started: bool) -> JobEnd:
    """The typed end of a stored job: its ``state``, the ``reason`` in words the store
    keeps, a rejected job's ``rejection`` code, and whether it ever ``started``. A
    rejected job's words are ``code: detail`` (as ``Rejection`` writes them); the detail
    is kept without the code."""
    if state == "queued":
        return JobEnd(Outcome.QUEUED if started else Outcome.NEVER_STARTED, None, reason)
    outcome = _OUTCOME_OF.get(state)
    if outcome is None:
        raise UnknownJobStateError(f"unknown job state {state!r} (one of {', '.join(JOB_STATES)})")
    if outcome is not Outcome.REJECTED:
        return JobEnd(outcome, None, reason)
    try:
        code = RejectReason(rejection)
    except ValueError:
        codes = ", ".join(r.value for r in RejectReason)
        raise UnknownJobStateError(
            f"a rejected job's reason code {rejection!r} is none of {codes}"
        ) from None
    prefix = f"{code.value}: "
    return JobEnd(outcome, code, reason[len(prefix) :] if reason.startswith(prefix) else reason)
