"""Table test of what a lease's exit means for its job (``live.rounds.exits``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpumosaic.runtime.executors.contract import ExitReport
from gpumosaic.runtime.state.records import JobRow
from gpumosaic.runtime.supervisor.exits import ExitOutcome, exit_outcome

JOB = JobRow(
    id=7, name="j", command="train", steps=100.0, num_gpu=1, gpu_milli=1000, gpu_models=(),
    priority_weight=1.0, job_type="job", workdir=".", env=(), max_retries=2, state="running",
    reason="", steps_done=40.0, checkpoint_steps=30.0, attempts=0, exit_code=None,
    log_tail="", attained_s=0.0, gpu_type="V100", gpu_index="0", lease_id="l", pid=None,
    cancel_requested=False, submitted_at=0.0, started_at=0.0, finished_at=None,
)  # fmt: skip


def report(code: int | None = 0, lost: bool = False) -> ExitReport:
    return ExitReport("l", code, lost, "", "node died" if lost else "")


CKPT_60 = {"checkpoint_steps": 60.0}
CASES = [
    # (job changes, report, stopped, steps, contacted, all reported) -> outcome
    ({}, report(0), False, 100.0, True, False, ExitOutcome("done", 100.0, 0, "")),
    ({}, report(-15), True, 100.0, True, False, ExitOutcome("done", 100.0, 0, "")),
    # exit 0 without ever calling the lease API: a failed attempt, never done
    (
        {},
        report(0),
        False,
        0.0,
        False,
        False,
        ExitOutcome(
            "queued", 30.0, 1, "attempt 1 failed (exit code 0 before its first lease call)", True
        ),
    ),
    # ended with new checkpointed progress: not an attempt (see test_exit_attempts.py)
    (CKPT_60, report(-15), True, 60.0, True, False, ExitOutcome("queued", 60.0, 0, "")),
    (CKPT_60, report(0), False, 60.0, True, False, ExitOutcome("queued", 60.0, 0, "")),
    (
        {},
        report(1),
        False,
        60.0,
        True,
        False,
        ExitOutcome("queued", 30.0, 1, "attempt 1 failed (exit code 1)", retry=True),
    ),
    (
        {"attempts": 2},
        report(1),
        False,
        60.0,
        True,
        False,
        ExitOutcome("failed", 30.0, 3, "exit code 1 after 3 attempt(s)"),
    ),
    (
        {},
        report(None, lost=True),
        False,
        60.0,
        True,
        False,
        ExitOutcome(
            "queued", 30.0, 0, "lease lost (node died); back in the queue at its last checkpoint"
        ),
    ),
    (
        {"cancel_requested": True},
        report(None, lost=True),
        False,
        60.0,
        True,
        False,
        ExitOutcome("cancelled", 30.0, 0, "cancelled by the user"),
    ),
    (
        {},
        report(1),
        False,
        60.0,
        True,
        True,
        ExitOutcome(
            "done", 100.0, 1, "all steps reported; attempt 1 failed (exit code 1)", retry=True
        ),
    ),
    (
        CKPT_60,
        report(-15),
        True,
        60.0,
        True,
        True,
        ExitOutcome("done", 100.0, 0, "all steps reported"),
    ),
    # exit 0 without a step past the lease's start: a failed attempt (Gavel's micro-task)
    (
        {},
        report(0),
        False,
        40.0,
        True,
        False,
        ExitOutcome(
            "queued",
            30.0,
            1,
            "attempt 1 failed (exit code 0 without checkpointing a new step)",
            retry=True,
        ),
    ),
]


@pytest.mark.parametrize(
    ("changes", "rep", "stopped", "steps", "contacted", "all_reported", "want"), CASES
)
def test_exit_outcome_table(
    changes: dict[str, object],
    rep: ExitReport,
    stopped: bool,
    steps: float,
    contacted: bool,
    all_reported: bool,
    want: ExitOutcome,
) -> None:
    job = replace(JOB, **changes)  # type: ignore[arg-type]
    got = exit_outcome(
        job,
        rep,
        stopped=stopped,
        steps=steps,
        base=30.0,  # the checkpoint the lease started from
        contacted=contacted,
        all_steps_reported=all_reported,
    )
    assert got == want
