"""The service's durable state in SQLite: jobs, leases, measured throughputs, rounds, events.

One ``Store`` owns one connection (WAL journal, ``synchronous=NORMAL``) behind a lock; every
change is one explicit transaction, so a SIGKILL leaves either the whole change or none of
it. The API threads and the round driver share the store; nothing else writes the file.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

from gpumosaic.results.outcome import JobEnd
from gpumosaic.runtime.jobs.ends import TERMINAL_STATES, rejection_code, store_state
from gpumosaic.runtime.jobs.submission import JobSubmission
from gpumosaic.runtime.state.records import (
    SCHEMA,
    EventRow,
    GandivaJobRow,
    JobRow,
    LeaseRow,
    add_missing_columns,
    job_row,
    lease_row,
)
from gpumosaic.runtime.state.writes import Statement, Writes


class StateUnwritable(Exception):
    """The state cannot be written now (disk full, read-only, file gone): found by a
    probe before anything was changed, so the caller may wait and try again."""


class Store:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.executescript(SCHEMA)
        add_missing_columns(self._db)
        self._depth = 0  # > 0 inside ``batch``: changes join its one transaction
        self._writes: Writes | None = None  # the open transaction's writes
        self._kept: list[Statement] = []  # a decision's writes not in the file yet
        self._behind: str | None = None  # why they are not
        # Bumped by every submission and cancellation, so the driver rescans the jobs
        # only when one happened (not at every tick).
        self.jobs_version = 0

    def epoch(self, now: float) -> float:
        """Time 0 of the decisions' clock: the first start of this state file, so that a
        restarted service goes on with the same times."""
        with self._tx() as db:
            db.execute("INSERT OR IGNORE INTO service (one, epoch_s) VALUES (1, ?)", (now,))
            r = db.execute("SELECT epoch_s FROM service").fetchone()
        return float(r["epoch_s"])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @property
    def behind(self) -> str | None:
        """Why the file lacks decisions made in memory (kept, to be written first by the
        next transaction), or None when it has them all."""
        with self._lock:
            return self._behind

    @contextmanager
    def _tx(self, *, keep: bool = False) -> Iterator[sqlite3.Connection]:
        """One transaction; the writes kept from a decision that could not be written
        (``batch``) go first in it. ``keep``: this is such a decision: its writes are
        kept instead of raising when the state cannot be written."""
        with self._lock:
            if self._depth:
                yield cast(sqlite3.Connection, self._writes)
                return
            writes = Writes(self._db, self._kept, keep=keep)
            self._writes = writes
            try:
                writes.begin()
                writes.replay()
                yield cast(sqlite3.Connection, writes)
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
                raise
            finally:
                self._writes = None
            try:
                writes.commit()
            except sqlite3.OperationalError as err:
                if not keep:
                    raise
                writes.failed = err
            if writes.failed is None:
                self._kept, self._behind = [], None
            else:  # the decision stands in memory: its writes wait for a writable state
                self._kept, self._behind = writes.statements, str(writes.failed)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """A decision's changes as one transaction (a round boundary, a tick): all or none
        survive a crash. The decision is made in memory as it is written, so a write that
        fails because the state cannot be written (``sqlite3.OperationalError``: disk
        full, read-only, I/O error, file gone; at any statement or at the COMMIT) does not
        raise: its statements are kept, in order, and ``behind`` says why; the next
        transaction (a probe's, an API call's, the next decision's) writes them first.
        The caller holds back what must not happen before they are written (executor
        calls: ``Supervisor.deferring``)."""
        with self._tx(keep=True):
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1

    # ---- jobs ----------------------------------------------------------------------

    def add_job(self, sub: JobSubmission, now: float, default_retries: int) -> int:
        return self.add_jobs([sub], now, default_retries)[0]

    def add_jobs(self, subs: list[JobSubmission], now: float, default_retries: int) -> list[int]:
        """Jobs admitted in one transaction: all of them, or (on any error) none."""
        ids = []
        with self._tx() as db:
            for sub in subs:
                retries = default_retries if sub.max_retries is None else sub.max_retries
                cur = db.execute(
                    "INSERT INTO jobs (name, command, steps, num_gpu, gpu_milli, gpu_models, "
                    "priority_weight, job_type, workdir, env, max_retries, state, submitted_at, "
                    "preemptible) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?)",
                    (
                        sub.name,
                        sub.command,
                        sub.steps,
                        sub.gpus,
                        sub.gpu_milli,
                        "|".join(m.upper() for m in sub.gpu_models),
                        sub.priority_weight,
                        sub.job_type,
                        sub.workdir,
                        json.dumps(sub.env, sort_keys=True),
                        retries,
                        now,
                        int(sub.preemptible),
                    ),
                )
                job_id = int(cur.lastrowid or 0)
                if not sub.name:
                    db.execute("UPDATE jobs SET name = ? WHERE id = ?", (f"job{job_id}", job_id))
                db.executemany(
                    "INSERT INTO job_rates (job_id, gpu_type, steps_per_s) VALUES (?, ?, ?)",
                    [(job_id, model, rate) for model, rate in sub.rates.items()],
                )
                self._event(db, now, job_id, "submitted", sub.command[:200])
                ids.append(job_id)
            self.jobs_version += 1
        return ids

    def job(self, job_id: int) -> JobRow | None:
        with self._lock:
            r = self._db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return None if r is None else job_row(r)

    def jobs(self, *, live_only: bool = False) -> list[JobRow]:
        query = "SELECT * FROM jobs"
        if live_only:
            query += " WHERE state IN ('queued', 'running')"
        with self._lock:
            rows = self._db.execute(query + " ORDER BY id").fetchall()
        return [job_row(r) for r in rows]

    def jobs_page(
        self, after: int, limit: int, state: str | None = None, name: str | None = None
    ) -> list[JobRow]:
        """At most ``limit`` jobs with ids above ``after``, in id order, of ``state`` and
        named ``name`` when given (``GET /v1/jobs``)."""
        query = "SELECT * FROM jobs WHERE id > ?"
        args: list[object] = [after]
        if state is not None:
            query += " AND state = ?"
            args.append(state)
        if name is not None:
            query += " AND name = ?"
            args.append(name)
        with self._lock:
            rows = self._db.execute(query + " ORDER BY id LIMIT ?", [*args, limit]).fetchall()
        return [job_row(r) for r in rows]

    def counts_by_state(self) -> dict[str, int]:
        with self._lock:
            rows = self._db.execute("SELECT state, COUNT(*) AS n FROM jobs GROUP BY state")
            return {str(r["state"]): int(r["n"]) for r in rows.fetchall()}

    def probe_write(self) -> None:
        """A real write (rewrites the one service row): raises ``sqlite3.Error`` when the
        state can no longer be written (read-only, disk full, I/O error)."""
        with self._tx() as db:
            db.execute("UPDATE service SET epoch_s = epoch_s")

    def check_writable(self) -> None:
        """``probe_write``, its failure as ``StateUnwritable`` (nothing was changed)."""
        try:
            self.probe_write()
        except sqlite3.Error as err:
            raise StateUnwritable(str(err)) from err

    def mark_running(
        self, job_id: int, lease_id: str, gpu_type: str, gpu_index: str, now: float
    ) -> None:
        with self._tx() as db:
            db.execute(
                "UPDATE jobs SET state = 'running', lease_id = ?, gpu_type = ?, gpu_index = ?, "
                "pid = NULL, started_at = COALESCE(started_at, ?) WHERE id = ?",
                (lease_id, gpu_type, gpu_index, now, job_id),
            )

    def record_progress(self, job_id: int, steps: float) -> None:
        with self._tx() as db:
            db.execute("UPDATE jobs SET steps_done = ? WHERE id = ?", (steps, job_id))

    def record_pid(self, job_id: int, lease_id: str, pid: int, now: float) -> None:
        with self._tx() as db:
            db.execute("UPDATE jobs SET pid = ? WHERE id = ?", (pid, job_id))
            db.execute(
                "UPDATE leases SET pid = ?, running_at = COALESCE(running_at, ?) WHERE id = ?",
                (pid, now, lease_id),
            )

    def record_checkpoint(self, job_id: int, steps: float, now: float) -> None:
        with self._tx() as db:
            db.execute(
                "UPDATE jobs SET checkpoint_steps = ?, steps_done = MAX(steps_done, ?) "
                "WHERE id = ?",
                (steps, steps, job_id),
            )
            self._event(db, now, job_id, "checkpoint", f"{steps:g}")

    def process_ended(
        self,
        job_id: int,
        *,
        state: str,
        steps_done: float,
        attempts: int,
        exit_code: int | None,
        log_tail: str,
        reason: str,
        now: float,
    ) -> None:
        """A job's process is gone: its state after that (queued again, or terminal)."""
        finished = now if state in TERMINAL_STATES else None
        with self._tx() as db:
            db.execute(
                "UPDATE jobs SET state = ?, steps_done = ?, attempts = ?, exit_code = ?, "
                "log_tail = ?, reason = ?, finished_at = ?, lease_id = NULL, pid = NULL "
                "WHERE id = ?",
                (state, steps_done, attempts, exit_code, log_tail, reason, finished, job_id),
            )
            if state != "queued" or reason:  # a lease that simply ended is in ``leases``
                self._event(db, now, job_id, state, reason)

    def finish(self, job_id: int, end: JobEnd, now: float) -> None:
        """A job leaves for good without a process ending (cancelled while queued, rejected)."""
        state, reason = store_state(end), end.words
        with self._tx() as db:
            db.execute(
                "UPDATE jobs SET state = ?, reason = ?, rejection = ?, finished_at = ?, "
                "lease_id = NULL WHERE id = ?",
                (state, reason, rejection_code(end), now, job_id),
            )
            self._event(db, now, job_id, state, reason)

    def request_cancel(self, job_id: int, now: float) -> bool:
        with self._tx() as db:
            cur = db.execute(
                "UPDATE jobs SET cancel_requested = 1 WHERE id = ? "
                "AND state IN ('queued', 'running')",
                (job_id,),
            )
            if cur.rowcount:
                self.jobs_version += 1
                self._event(db, now, job_id, "cancel_requested")
        return bool(cur.rowcount)

    # ---- leases --------------------------------------------------------------------

    def add_lease(
        self,
        lease_id: str,
        job_id: int,
        round_idx: int,
        gpu_type: str,
        parts: list[tuple[int, tuple[int, ...], int]],
        now: float,
    ) -> None:
        with self._tx() as db:
            db.execute(  # the leases table is the record: no event row per lease
                "INSERT INTO leases (id, job_id, round, gpu_type, parts, active, started_at) "
                "VALUES (?, ?, ?, ?, ?, 1, ?)",
                (lease_id, job_id, round_idx, gpu_type, json.dumps(parts), now),
            )

    def extend_lease(self, lease_id: str) -> None:
        with self._tx() as db:
            db.execute("UPDATE leases SET extensions = extensions + 1 WHERE id = ?", (lease_id,))

    def end_lease(self, lease_id: str, now: float, reason: str, exit_code: int | None) -> None:
        with self._tx() as db:
            db.execute(
                "UPDATE leases SET active = 0, ended_at = ?, end_reason = ?, exit_code = ? "
                "WHERE id = ? AND active = 1",
                (now, reason, exit_code, lease_id),
            )

    def leases(self, job_id: int | None = None, *, active_only: bool = False) -> list[LeaseRow]:
        query, args = "SELECT * FROM leases WHERE 1=1", []
        if job_id is not None:
            query += " AND job_id = ?"
            args.append(job_id)
        if active_only:
            query += " AND active = 1"
        with self._lock:
            rows = self._db.execute(query + " ORDER BY started_at, id", args).fetchall()
        return [lease_row(r) for r in rows]

    # ---- throughputs ---------------------------------------------------------------

    def save_round_measures(
        self,
        attained: list[tuple[float, int]],
        rates: list[tuple[int, str, float, int]],
    ) -> None:
        """A round's accounting in two statements: GPU-seconds received per job, and the
        jobs' throughput estimates (job, GPU type, steps/s, samples)."""
        with self._tx() as db:
            db.executemany("UPDATE jobs SET attained_s = attained_s + ? WHERE id = ?", attained)
            db.executemany(
                "INSERT INTO throughputs VALUES (?, ?, ?, ?) ON CONFLICT (job_id, gpu_type) "
                "DO UPDATE SET steps_per_s = excluded.steps_per_s, samples = excluded.samples",
                rates,
            )

    def known_rates(self, job_id: int) -> dict[str, float]:
        """The rates the job's submission gave (GPU model -> steps/s): its prior."""
        with self._lock:
            rows = self._db.execute(
                "SELECT gpu_type, steps_per_s FROM job_rates WHERE job_id = ?", (job_id,)
            ).fetchall()
        return {r["gpu_type"]: float(r["steps_per_s"]) for r in rows}

    def throughput_samples(self, job_id: int) -> dict[str, tuple[float, int]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT gpu_type, steps_per_s, samples FROM throughputs WHERE job_id = ?",
                (job_id,),
            ).fetchall()
        return {r["gpu_type"]: (float(r["steps_per_s"]), int(r["samples"])) for r in rows}

    def throughputs(self, job_id: int) -> dict[str, float]:
        with self._lock:
            rows = self._db.execute(
                "SELECT gpu_type, steps_per_s FROM throughputs WHERE job_id = ?", (job_id,)
            ).fetchall()
        return {r["gpu_type"]: float(r["steps_per_s"]) for r in rows}

    # ---- rounds and events ---------------------------------------------------------

    def start_round(self, idx: int, start_s: float, plan: list[object]) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO rounds (idx, start_s, plan) VALUES (?, ?, ?)",
                (idx, start_s, json.dumps(plan)),
            )

    def end_round(self, idx: int, end_s: float) -> None:
        with self._tx() as db:
            db.execute("UPDATE rounds SET end_s = ? WHERE idx = ?", (end_s, idx))

    def last_round(self) -> int:
        with self._lock:
            r = self._db.execute("SELECT MAX(idx) AS m FROM rounds").fetchone()
        return -1 if r["m"] is None else int(r["m"])

    def rounds(self) -> list[tuple[int, float, float | None, list[object]]]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM rounds ORDER BY idx").fetchall()
        return [(r["idx"], r["start_s"], r["end_s"], json.loads(r["plan"])) for r in rows]

    def event(self, t: float, job_id: int | None, kind: str, detail: str = "") -> None:
        with self._tx() as db:
            self._event(db, t, job_id, kind, detail)

    @staticmethod
    def _event(
        db: sqlite3.Connection, t: float, job_id: int | None, kind: str, detail: str = ""
    ) -> None:
        db.execute(
            "INSERT INTO events (t, job_id, kind, detail) VALUES (?, ?, ?, ?)",
            (t, job_id, kind, detail),
        )

    def events(self, job_id: int | None = None) -> list[EventRow]:
        query, args = "SELECT * FROM events", []
        if job_id is not None:
            query += " WHERE job_id = ?"
            args.append(job_id)
        with self._lock:
            rows = self._db.execute(query + " ORDER BY seq", args).fetchall()
        return [EventRow(r["seq"], r["t"], r["job_id"], r["kind"], r["detail"]) for r in rows]

    def recover(self, now: float) -> list[LeaseRow]:
        """After a restart: end every lease the last run left active and put its job back in
        the queue at its last checkpoint. Returns those leases (their processes, if any
        survived, must be stopped before the job runs again)."""
        stale = self.leases(active_only=True)
        with self._tx() as db:
            for lease in stale:
                db.execute(
                    "UPDATE leases SET active = 0, ended_at = ?, end_reason = 'service restart' "
                    "WHERE id = ?",
                    (now, lease.id),
                )
            db.execute(
                "UPDATE jobs SET state = 'queued', steps_done = checkpoint_steps, "
                "lease_id = NULL, pid = NULL WHERE state = 'running'"
            )
            for lease in stale:
                self._event(db, now, lease.job_id, "requeued", "service restart")
        return stale

    # ---- serve --mechanism gandiva ---------------------------------------------------

    def gandiva_job(self, job_id: int) -> GandivaJobRow | None:
        with self._lock:
            r = self._db.execute(
                "SELECT * FROM gandiva_jobs WHERE job_id = ?", (job_id,)
            ).fetchone()
        if r is None:
            return None
        return GandivaJobRow(r["job_id"], r["suspensions"], r["migrations"], r["packed_with"])

    def save_gandiva_job(self, row: GandivaJobRow) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO gandiva_jobs (job_id, suspensions, migrations, packed_with) "
                "VALUES (?, ?, ?, ?) ON CONFLICT(job_id) DO UPDATE SET "
                "suspensions = excluded.suspensions, migrations = excluded.migrations, "
                "packed_with = excluded.packed_with",
                (row.job_id, row.suspensions, row.migrations, row.packed_with),
            )
