"""No job is relaunched forever (issue 35, class 3): every kind of exit, and whether it
counts as an attempt (``exits.exit_outcome`` and its rule ``counts_as_attempt``).

The job has 100 steps; its lease started at checkpoint 30 (``base``). An exit "saved"
when the store's checkpoint is past 30 when it ends."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from gpumosaic.runtime.executors.contract import ExitReport
from gpumosaic.runtime.state.records import JobRow
from gpumosaic.runtime.supervisor.exits import exit_outcome

JOB = JobRow(
    id=7, name="j", command="train", steps=100.0, num_gpu=1, gpu_milli=1000, gpu_models=(),
    priority_weight=1.0, job_type="job", workdir=".", env=(), max_retries=2, state="running",
    reason="", steps_done=30.0, checkpoint_steps=30.0, attempts=0, exit_code=None,
    log_tail="", attained_s=0.0, gpu_type="V100", gpu_index="0", lease_id="l", pid=None,
    cancel_requested=False, submitted_at=0.0, started_at=0.0, finished_at=None,
)  # fmt: skip
BASE = 30.0


@dataclass(frozen=True, slots=True)
class Kind:
    """One kind of exit and what it must mean."""

    name: str
    code: int | None
    contacted: bool = True
    steps: float = 30.0  # reported by the lease
    saved: float = 30.0  # the store's checkpoint when it ended
    stopped: bool = False
    lost: bool = False
    failure: str = ""
    cancel: bool = False
    state: str = "queued"
    attempt: bool = True


KINDS = [
    Kind("never started (launch failed)", None, contacted=False),
    Kind("exit 0 before the first lease call", 0, contacted=False),
    Kind("exit 1 before the first lease call", 1, contacted=False),
    Kind("exit 0, no step", 0),
    Kind("exit 0, steps never checkpointed (issue 35)", 0, steps=31),
    Kind("exit 0, steps checkpointed", 0, steps=60, saved=60, attempt=False),
    Kind("exit 0, all steps", 0, steps=100, saved=90, state="done", attempt=False),
    Kind("exit 1 after checkpointed steps", 1, steps=60, saved=60),
    Kind("exit 1 with all steps reported", 1, steps=100, saved=90),
    Kind("killed by a signal, no checkpoint", -9, steps=60),
    Kind("stopped at lease end, saved", -15, steps=60, saved=60, stopped=True, attempt=False),
    Kind("stopped at lease end, steps never checkpointed", -15, steps=60, stopped=True),
    Kind("stopped before its first step", -15, stopped=True, attempt=False),
    Kind("stopped before its first lease call", -15, contacted=False, stopped=True, attempt=False),
    Kind("stopped, all steps", -15, steps=100, saved=90, stopped=True, state="done", attempt=False),
    Kind("stopped as failed (silent)", -15, steps=40, stopped=True, failure="stopped reporting"),
    Kind("lease lost with its node", None, steps=60, lost=True, attempt=False),
    Kind("cancelled", -15, steps=60, stopped=True, cancel=True, state="cancelled", attempt=False),
]  # fmt: skip


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_every_kind_of_exit_counts_or_not(kind: Kind) -> None:
    job = replace(JOB, checkpoint_steps=kind.saved, cancel_requested=kind.cancel)
    report = ExitReport("l", kind.code, kind.lost, "", "node died" if kind.lost else "")
    got = exit_outcome(
        job, report, stopped=kind.stopped, steps=kind.steps, base=BASE,
        contacted=kind.contacted, all_steps_reported=False, failure=kind.failure,
    )  # fmt: skip
    assert got.state == kind.state, (kind, got)
    assert got.attempts == int(kind.attempt), (kind, got)
    assert got.retry == kind.attempt, (kind, got)
    if kind.attempt:
        assert got.reason.startswith("attempt 1 failed"), (kind, got.reason)


def test_a_job_that_never_checkpoints_fails_after_its_retries() -> None:
    """The issue's job: one step per launch, exit 0, never a checkpoint. Each launch is an
    attempt; after ``max_retries`` + 1 launches it is failed, not requeued forever."""
    job = JOB
    launch = 0
    while launch < 10:
        launch += 1
        got = exit_outcome(
            job, ExitReport("l", 0, False, ""), stopped=False, steps=BASE + 1, base=BASE,
            contacted=True, all_steps_reported=False,
        )  # fmt: skip
        if got.state == "failed":
            break
        job = replace(job, attempts=got.attempts)
    assert got.state == "failed" and launch == JOB.max_retries + 1, (launch, got)
