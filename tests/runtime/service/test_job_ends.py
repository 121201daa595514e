"""The live store's job states (an interface: their spellings stay) map to and from the
typed end (``results.outcome.JobEnd``); the live round decider records a failed or a
cancelled job as such, never as completed with all its steps."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from builders import in_process

from gpumosaic.mechanisms.rounds.sim.driver import job_records
from gpumosaic.results.outcome import JobEnd, Outcome, Rejection, RejectReason
from gpumosaic.results.result import JobStatus
from gpumosaic.runtime.jobs.ends import (
    CANCELLED_BY_USER,
    JOB_STATES,
    TERMINAL_STATES,
    UnknownJobStateError,
    job_end,
    store_state,
)
from gpumosaic.runtime.jobs.submission import JobSubmission
from gpumosaic.runtime.state.store import Store


@pytest.mark.parametrize(
    ("state", "reason", "rejection", "started", "end"),
    [
        ("done", "", "", True, JobEnd(Outcome.COMPLETED)),
        ("failed", "exit code 1", "", True, JobEnd(Outcome.FAILED, None, "exit code 1")),
        ("cancelled", "by me", "", False, JobEnd(Outcome.CANCELLED, None, "by me")),
        ("running", "", "", True, JobEnd(Outcome.RUNNING)),
        ("queued", "", "", True, JobEnd(Outcome.QUEUED)),
        ("queued", "", "", False, JobEnd(Outcome.NEVER_STARTED)),
        (
            "rejected",
            "never_fits: asks for 9 GPUs",
            "never_fits",
            False,
            JobEnd(Outcome.REJECTED, RejectReason.NEVER_FITS, "asks for 9 GPUs"),
        ),
    ],
)
def test_each_stored_state_is_one_typed_end_and_back(
    state: str, reason: str, rejection: str, started: bool, end: JobEnd
) -> None:
    assert job_end(state, reason, rejection, started) == end
    assert store_state(end) == state
    assert end.words == reason


def test_the_spellings_stay_and_terminal_means_final() -> None:
    assert JOB_STATES == ("queued", "running", "done", "failed", "cancelled", "rejected")
    assert {"done", "failed", "cancelled", "rejected"} == TERMINAL_STATES
    for state in JOB_STATES:
        end = job_end(state, "x", "cpu_only" if state == "rejected" else "", True)
        assert end.final is (state in TERMINAL_STATES)


def test_an_unknown_state_or_rejection_code_is_named() -> None:
    with pytest.raises(UnknownJobStateError, match="'paused'"):
        job_end("paused", "", "", True)
    with pytest.raises(UnknownJobStateError, match="'too_big' is none of never_fits"):
        job_end("rejected", "too big", "too_big", False)


def test_the_store_keeps_a_rejections_typed_reason(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    sub = JobSubmission(command="x", steps=1)
    rejected, cancelled = store.add_jobs([sub, sub], 0.0, default_retries=0)
    end = JobEnd.rejected(Rejection(RejectReason.NEVER_FITS, "asks for 9 GPUs"))
    store.finish(rejected, end, 1.0)
    store.finish(cancelled, CANCELLED_BY_USER, 2.0)
    rows = {j.id: j for j in store.jobs()}
    assert rows[rejected].end == end
    assert (rows[rejected].state, rows[rejected].reason) == ("rejected", str(end.words))
    assert rows[cancelled].end == CANCELLED_BY_USER
    assert rows[cancelled].state == "cancelled"
    store.close()


def test_an_older_state_file_gets_its_rejections_typed(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = Store(path)
    sub = JobSubmission(command="x", steps=1)
    kept, plain = store.add_jobs([sub, sub], 0.0, default_retries=0)
    store.close()
    with sqlite3.connect(path) as db:  # as a version before the column wrote them
        db.execute("ALTER TABLE jobs DROP COLUMN rejection")
        db.execute(
            "UPDATE jobs SET state = 'rejected', reason = 'no_throughput: no rate' WHERE id = ?",
            (kept,),
        )
    again = Store(path)
    rows = {j.id: j for j in again.jobs()}
    assert rows[kept].end == JobEnd(Outcome.REJECTED, RejectReason.NO_THROUGHPUT, "no rate")
    assert rows[plain].end == JobEnd(Outcome.NEVER_STARTED)
    again.close()
    Store(path).close()  # opens again unchanged


def test_the_live_decider_records_failed_and_cancelled_as_such(tmp_path: Path) -> None:
    bench = in_process(tmp_path, counts="v100:2")
    done = bench.submit(20)
    failed = bench.submit(1e6, max_retries=0)
    cancelled = bench.submit(1e6)
    bench.run_round(ticks=40, dt=1.0)
    bench.run_round(ticks=1, dt=1.0)
    assert bench.states()[done] == "done"
    assert failed in bench.driver.lease_of, bench.states()
    # the failing job's process dies with an error; the other is cancelled
    lease = bench.driver.lease_of[failed]
    bench.executor.stop(lease, 0.0)  # its process dies; the supervisor counts it failed
    bench.driver.supervisor.stop(lease, failure="it stopped reporting")
    bench.store.request_cancel(cancelled, bench.clock())
    for _ in range(5):
        bench.clock.t += 1.0
        bench.driver.tick(bench.clock())
    assert bench.states() == {done: "done", failed: "failed", cancelled: "cancelled"}
    decider = bench.driver.decider
    records = {r.job_id: r for r in job_records(decider.jobs, decider.type_names)}
    assert {i: r.status for i, r in records.items()} == {
        done: JobStatus.COMPLETED,
        failed: JobStatus.FAILED,
        cancelled: JobStatus.CANCELLED,
    }
    for job in (failed, cancelled):  # not credited with all its steps
        row = bench.driver.row_of[job]
        assert decider.jobs.done_steps[row] < decider.jobs.total_steps[row]
        assert not decider.jobs.is_active[row]
