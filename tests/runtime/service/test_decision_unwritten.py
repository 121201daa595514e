"""A decision the state file cannot take (issue 35, class 2): the write probe passed, then
a write inside the round boundary failed (the disk filled between the two, the file
system went read-only). The round loop must not die: the decision, already made in
memory, is kept and written first when the state can be written again; until then no
process is started or stopped that the file does not know of, every write is refused,
and the boundary says ``StateUnwritable`` (the loop's "wait and try again")."""

from __future__ import annotations

import json
import sqlite3
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from builders import Bench, in_process
from rounds_support import explain, wait_for

from gpumosaic.runtime.api.client import ServiceClient
from gpumosaic.runtime.jobs.submission import JobSubmission
from gpumosaic.runtime.state.store import StateUnwritable, Store

FULL = "database or disk is full"
READ_ONLY = "attempt to write a readonly database"
ROUND = "INSERT OR REPLACE INTO rounds"  # a boundary's plan, never the probe's write
LEASE = "INSERT INTO leases"


class Faults:
    """The store's connection, failing on demand as SQLite does: the COMMIT of any
    transaction that wrote ``commit_fails_with`` (a full disk found at the commit), or
    the statement ``statement_fails`` itself (a read-only file system)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self.commit_fails_with: str | None = None
        self.statement_fails: str | None = None
        self.refused = 0
        self._tx: list[str] = []

    def execute(self, sql: str, *args: Any) -> Any:
        if sql.startswith("BEGIN"):
            self._tx = []
        self._tx.append(sql)
        if self.statement_fails and sql.startswith(self.statement_fails):
            self.refused += 1
            raise sqlite3.OperationalError(READ_ONLY)
        fails = self.commit_fails_with
        if sql == "COMMIT" and fails and any(s.startswith(fails) for s in self._tx):
            self.refused += 1
            self._db.execute("ROLLBACK")  # what SQLite does on SQLITE_FULL
            raise sqlite3.OperationalError(FULL)
        return self._db.execute(sql, *args)

    def executemany(self, sql: str, rows: Any) -> Any:
        self._tx.append(sql)
        return self._db.executemany(sql, rows)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


def faulty(bench: Bench) -> Faults:
    faults = Faults(bench.store._db)
    bench.store._db = faults  # type: ignore[assignment]
    return faults


def consistent(bench: Bench) -> None:
    """The file says what the driver holds: its live leases, its jobs' states."""
    store, driver = bench.store, bench.driver
    assert store.behind is None
    active = {x.job_id: x.id for x in store.leases(active_only=True)}
    assert active == driver.lease_of
    assert store.last_round() == driver.round_idx
    for job in store.jobs(live_only=True):
        assert (job.state == "running") == (job.id in driver.lease_of), job


def finish(bench: Bench, rounds: int = 60) -> None:
    for _ in range(rounds):
        bench.run_round(ticks=10, dt=1.0)
        if all(s == "done" for s in bench.states().values()):
            return
    raise AssertionError(f"jobs not done after {rounds} rounds: {bench.states()}")


@pytest.mark.parametrize("how", ["commit", "statement"])
def test_a_boundary_that_cannot_be_written_is_kept_and_written_later(
    tmp_path: Path, how: str
) -> None:
    # Three 30-step jobs on two GPUs: rounds move them around (stops and launches).
    bench = in_process(tmp_path, counts="v100:2", round_s=10.0)
    jobs = [bench.submit(30) for _ in range(3)]
    bench.run_round(ticks=10, dt=1.0)
    faults = faulty(bench)
    if how == "commit":
        faults.commit_fails_with = ROUND
    else:
        faults.statement_fails = LEASE
    stops: list[str] = []
    stop = bench.executor.stop
    bench.executor.stop = lambda lease, grace: (stops.append(lease), stop(lease, grace))[1]  # type: ignore[method-assign]
    launches = bench.executor.launches
    bench.clock.t += 1.0
    with pytest.raises(StateUnwritable):
        bench.driver.boundary(bench.clock())  # the probe passes; the boundary's write fails
    assert faults.refused >= 1 and bench.store.behind is not None
    decided = bench.plans[-1]
    # Nothing happened to processes that the file does not know of.
    assert (bench.executor.launches, stops) == (launches, [])
    with pytest.raises(StateUnwritable):
        bench.driver.tick(bench.clock())
    with pytest.raises(StateUnwritable):  # still failing: the same decision, kept
        bench.driver.boundary(bench.clock())
    with pytest.raises(sqlite3.OperationalError):  # an API write is refused meanwhile
        bench.store.add_job(JobSubmission(command="train", steps=5), bench.clock(), 2)
    faults.commit_fails_with = faults.statement_fails = None
    plan = bench.driver.boundary(bench.clock())  # written now: the same plan, not a new one
    assert plan is decided and len(bench.plans) == 2
    consistent(bench)
    assert bench.executor.launches > launches
    finish(bench)
    assert all(bench.store.job(j).attempts == 0 for j in jobs)  # type: ignore[union-attr]


def test_a_tick_that_cannot_be_written_is_kept(tmp_path: Path) -> None:
    # An exit recorded in a tick whose commit fails: the job's end waits, kept.
    bench = in_process(tmp_path, counts="v100:1", round_s=100.0)
    job = bench.submit(4)  # done within the round's first ticks at 2 steps/s
    bench.driver.boundary(bench.clock())
    faults = faulty(bench)
    faults.commit_fails_with = "UPDATE jobs SET state"
    for _ in range(5):
        bench.clock.t += 1.0
        try:
            bench.driver.tick(bench.clock())
        except StateUnwritable:
            break
    assert bench.store.behind is not None and not bench.driver.lease_of
    assert bench.store.job(job).state == "running"  # type: ignore[union-attr]
    faults.commit_fails_with = None
    bench.driver.tick(bench.clock())
    assert bench.store.job(job).state == "done"  # type: ignore[union-attr]
    consistent(bench)


def _status(url: str, body: bytes | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, data=body, method="POST" if body else "GET")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_the_round_loop_lives_through_a_boundary_it_cannot_write(api_factory) -> None:  # type: ignore[no-untyped-def]
    svc = api_factory(round_s=0.5)
    faults = Faults(svc.store._db)
    svc.store._db = faults
    client = ServiceClient(svc.url)
    # Submitted first: once a boundary has failed, the API refuses writes (503), and on a
    # loaded machine the first boundary may come before the submission.
    job = client.submit({"command": "train", "steps": 100})
    faults.commit_fails_with = ROUND  # the probe's write passes: only boundaries fail
    wait_for(lambda: faults.refused > 0, 60, "a boundary's write refused", explain(svc))
    wait_for(lambda: _status(svc.url + "/healthz")[0] == 503, 60, "/healthz 503")
    assert FULL in _status(svc.url + "/healthz")[1]
    body = json.dumps({"command": "train", "steps": 10}).encode()
    status, text = _status(svc.url + "/v1/jobs", body)
    assert status == 503 and FULL in text, (status, text)
    seen = faults.refused
    wait_for(lambda: faults.refused > seen + 2, 60, "the loop trying again (not dead)")
    assert svc.driver_error is None and svc._threads[1].is_alive()
    assert "gpumosaic_state_writable 0" in _status(svc.url + "/metrics")[1]
    faults.commit_fails_with = None
    wait_for(lambda: _status(svc.url + "/healthz")[0] == 200, 60, "/healthz 200 again")
    wait_for(lambda: client.job(job)["state"] == "done", 120, "the job done", explain(svc))
    assert client.job(job)["attempts"] == 0
    assert svc.driver_error is None


def test_a_store_with_kept_writes_refuses_then_writes_them_first(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    faults = Faults(store._db)
    store._db = faults  # type: ignore[assignment]
    store.epoch(0.0)
    faults.commit_fails_with = "INSERT INTO events"
    with store.batch():
        store.event(1.0, None, "first")
        store.event(2.0, None, "second")
    assert store.behind is not None and store.events() == []
    with pytest.raises(sqlite3.OperationalError):
        store.event(3.0, None, "refused")
    faults.commit_fails_with = None
    store.event(4.0, None, "third")  # the kept decision goes first, in its order
    assert [e.kind for e in store.events()] == ["first", "second", "third"]
    assert store.behind is None
