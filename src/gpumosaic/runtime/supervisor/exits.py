"""What a lease's exit means for its job: done, back in the queue (at its last
checkpoint), failed after its retries, or cancelled (``exit_outcome``: a decision without
a clock or any state of its own), and how both live drivers (rounds, Gandiva) record it
in the store (``record_exit``); each driver counts it and updates its own state."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpumosaic.results.outcome import JobEnd
from gpumosaic.runtime.executors.contract import ExitReport
from gpumosaic.runtime.jobs.ends import job_end
from gpumosaic.runtime.state.records import JobRow

if TYPE_CHECKING:
    from gpumosaic.runtime.leases import LiveLease
    from gpumosaic.runtime.state.store import Store


@dataclass(frozen=True, slots=True)
class ExitOutcome:
    state: str  # "done", "queued", "failed" or "cancelled"
    steps_done: float  # the job's steps that survive (its checkpoint unless done)
    attempts: int
    reason: str
    retry: bool = False  # a failed attempt that will run again

    @property
    def end(self) -> JobEnd:
        """The job's end, typed (``runtime.jobs.ends``): a process ran, so it started."""
        return job_end(self.state, self.reason, "", started=True)


def exit_outcome(
    job: JobRow,
    report: ExitReport,
    *,
    stopped: bool,
    steps: float,
    base: float,
    contacted: bool,
    all_steps_reported: bool,
    failure: str = "",
) -> ExitOutcome:
    """``job`` as the store has it before this exit; ``stopped``: the driver asked the
    lease to stop; ``steps``: the steps the lease reported (``base`` at its launch);
    ``contacted``: the process called the lease API; ``all_steps_reported``: the decider
    already counted all the job's steps (it will never plan it again); ``failure``: why
    the driver stopped a lease as failed (it stopped reporting, or never called the API).

    The rule (docs/live.md, "Launch failures"), ``counts_as_attempt``: every way a
    process ends short of its job's steps without new checkpointed progress is a failed
    attempt, whatever its exit code; after ``max_retries`` retries the job is failed. A
    job is done only when all its steps were reported."""
    kept = job.checkpoint_steps  # what survives this process
    code = report.exit_code
    if job.cancel_requested:
        outcome = ExitOutcome("cancelled", kept, job.attempts, "cancelled by the user")
    elif failure:
        outcome = _failed_attempt(job, kept, failure)
    elif report.lost:
        reason = f"lease lost ({report.detail}); back in the queue at its last checkpoint"
        outcome = ExitOutcome("queued", kept, job.attempts, reason)
    elif not job.preemptible and not stopped:
        # One lease from start to exit, no steps reported: its exit code is its end.
        if code == 0:
            outcome = ExitOutcome("done", job.steps, job.attempts, "")
        else:
            outcome = ExitOutcome("failed", kept, job.attempts + 1, f"exit code {code}")
    elif steps >= job.steps and (code == 0 or stopped):
        # All steps reported: done, even if our stop (the decider saw it finish at the
        # round's end) caught the process on its way out.
        outcome = ExitOutcome("done", job.steps, job.attempts, "")
    else:
        why = counts_as_attempt(
            code, stopped=stopped, contacted=contacted, ran=steps > base, saved=kept > base
        )
        if why is None:
            outcome = ExitOutcome("queued", kept, job.attempts, "")  # the lease simply ended
        else:
            first_call = not contacted and not stopped and report.detail
            outcome = _failed_attempt(job, kept, report.detail if first_call else why)
    if outcome.state == "queued" and all_steps_reported:
        # The work is done even though this last process did not end cleanly.
        reason = "all steps reported" + (f"; {outcome.reason}" if outcome.reason else "")
        return ExitOutcome("done", job.steps, outcome.attempts, reason, outcome.retry)
    return outcome


def counts_as_attempt(
    code: int | None, *, stopped: bool, contacted: bool, ran: bool, saved: bool
) -> str | None:
    """Why an exit short of the job's steps (not lost, not cancelled, not stopped as
    failed) is a failed attempt, or None when it is not one. ``stopped``: the driver asked
    it to stop (its lease ended); ``contacted``: it called the lease API; ``ran``: it
    reported steps past its launch's checkpoint; ``saved``: it checkpointed steps past it.

    A process that made no new checkpointed progress used its launch for nothing, so it
    counts whatever its exit code (0 included: a job that steps, never checkpoints and
    exits 0 would otherwise be relaunched forever). Two exits are not its fault: stopped
    before its first lease call (a slow start the round cut short) and stopped before
    its first step (it never had the chance to save one)."""
    if stopped:
        if ran and not saved:
            return "stopped with steps it never checkpointed"
        return None
    if not contacted:
        return f"exit code {code} before its first lease call"
    if code != 0:
        return f"exit code {code}"  # an error, even after progress (Gavel's failed task)
    if not saved:
        return "exit code 0 without checkpointing a new step"
    return None


def record_exit(
    store: Store,
    job: JobRow,
    report: ExitReport,
    lease: LiveLease | None,
    now: float,
    *,
    stopped: bool,
    all_steps_reported: bool,
    failure: str = "",
) -> ExitOutcome:
    """The lease of ``report`` ended (``lease``: its last state, None if it was never
    added): record its end and what it means for ``job`` (the store's row before the
    exit), and return that outcome."""
    how = "lost: " + report.detail if report.lost else ("stopped" if stopped else "exited")
    store.end_lease(report.lease_id, now, how, report.exit_code)
    outcome = exit_outcome(
        job,
        report,
        stopped=stopped,
        steps=lease.steps if lease is not None else job.steps_done,
        base=lease.steps_at_launch if lease is not None else job.steps_done,
        contacted=lease is not None and lease.contacted,
        all_steps_reported=all_steps_reported,
        failure=failure,
    )
    store.process_ended(
        job.id,
        state=outcome.state,
        steps_done=outcome.steps_done,
        attempts=outcome.attempts,
        exit_code=report.exit_code,
        log_tail=report.log_tail,
        reason=outcome.reason,
        now=now,
    )
    return outcome


def _failed_attempt(job: JobRow, kept: float, what: str) -> ExitOutcome:
    attempts = job.attempts + 1
    if attempts > job.max_retries:
        return ExitOutcome("failed", kept, attempts, f"{what} after {attempts} attempt(s)")
    return ExitOutcome("queued", kept, attempts, f"attempt {attempts} failed ({what})", True)
