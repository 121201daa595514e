"""The ``/ui`` page's reading of a round service's state file: its own read-only SQLite
connection (WAL: readers never block the service's writer), read again only when the
file changed (``PRAGMA data_version``), jobs kept as value objects so the view rebuilds
only what changed."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from gpumosaic.runtime.jobs.submission import TERMINAL_STATES
from gpumosaic.runtime.state.store import Store

RECENT_TERMINAL = 100  # finished / failed / cancelled / rejected jobs kept on the page


# The job columns the page shows, as read from the store's ``jobs`` table.
JOB_COLUMNS = (
    "id", "name", "state", "steps", "steps_done", "num_gpu", "gpu_milli", "gpu_type",
    "gpu_index", "attained_s", "attempts", "submitted_at", "started_at", "finished_at",
    "reason", "cancel_requested", "lease_id",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class JobFacts:
    """One job as the page needs it (a row of ``JOB_COLUMNS``)."""

    id: int
    name: str
    state: str
    steps: float
    steps_done: float
    num_gpu: int
    gpu_milli: int
    gpu_type: str
    gpu_index: str
    attained_s: float
    attempts: int
    submitted_at: float
    started_at: float | None
    finished_at: float | None
    reason: str
    cancel_requested: bool
    lease_id: str | None


@dataclass(frozen=True, slots=True)
class StoreFacts:
    live: tuple[JobFacts, ...]  # queued and running, by id
    ended: tuple[JobFacts, ...]  # the latest terminal ones, last finished last
    counts: dict[str, int]  # jobs by state
    held: tuple[tuple[int, tuple[tuple[int, tuple[int, ...], int], ...]], ...]  # active leases


class StoreReader:
    """The view's own read-only connection to the service's state file (WAL: readers never
    block the service's writer); it reads again only when the file changed."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._db: sqlite3.Connection | None = None
        if str(store.path) != ":memory:":
            uri = store.path.resolve().as_uri() + "?mode=ro"
            self._db = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
        self._version: int | None = None
        self.facts = StoreFacts((), (), {}, ())
        self.reads = 0
        # job id -> (row as read, its JobFacts): an unchanged row keeps its object, so the
        # view rebuilds only what changed.
        self._rows: dict[int, tuple[tuple[Any, ...], JobFacts]] = {}

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def read(self) -> bool:
        """Refresh ``facts`` if the file changed since the last read; True if it did."""
        db = self._db
        if db is None:  # an in-memory store (tests): through its own methods, every time
            self.facts = self._from_store()
            self.reads += 1
            return True
        version = int(db.execute("PRAGMA data_version").fetchone()[0])
        if version == self._version:
            return False
        columns = ", ".join(JOB_COLUMNS)
        db.execute("BEGIN")  # one snapshot for the three reads
        try:
            live = db.execute(
                f"SELECT {columns} FROM jobs WHERE state IN ('queued', 'running') ORDER BY id"
            ).fetchall()
            ended = db.execute(
                f"SELECT {columns} FROM jobs WHERE state NOT IN ('queued', 'running') "
                "ORDER BY finished_at DESC, id DESC LIMIT ?",
                (RECENT_TERMINAL,),
            ).fetchall()
            counts = db.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall()
            held = db.execute("SELECT job_id, parts FROM leases WHERE active = 1").fetchall()
        finally:
            db.execute("COMMIT")
        self._version = version
        before, rows = self._rows, {}
        for r in (*live, *ended):
            known = before.get(r[0])
            rows[r[0]] = known if known is not None and known[0] == r else (r, _facts(r))
        self._rows = rows
        self.facts = StoreFacts(
            tuple(rows[r[0]][1] for r in live),
            tuple(rows[r[0]][1] for r in reversed(ended)),
            {str(state): int(n) for state, n in counts},
            tuple((int(j), _parts(p)) for j, p in held),
        )
        self.reads += 1
        return True

    def _from_store(self) -> StoreFacts:
        rows = self.store.jobs()
        facts = [JobFacts(*(getattr(j, c) for c in JOB_COLUMNS)) for j in rows]
        counts: dict[str, int] = {}
        for f in facts:
            counts[f.state] = counts.get(f.state, 0) + 1
        ended = sorted((f for f in facts if f.state in TERMINAL_STATES),
                       key=lambda f: (f.finished_at or 0.0, f.id))[-RECENT_TERMINAL:]  # fmt: skip
        held = tuple((x.job_id, x.parts) for x in self.store.leases(active_only=True))
        return StoreFacts(
            tuple(f for f in facts if f.state not in TERMINAL_STATES), tuple(ended), counts, held
        )


def _facts(r: tuple[Any, ...]) -> JobFacts:
    return JobFacts(
        int(r[0]), r[1], r[2], float(r[3]), float(r[4]), int(r[5]), int(r[6]), r[7], r[8],
        float(r[9]), int(r[10]), float(r[11]), r[12], r[13], r[14], bool(r[15]), r[16],
    )  # fmt: skip


def _parts(text: str) -> tuple[tuple[int, tuple[int, ...], int], ...]:
    return tuple((int(n), tuple(int(g) for g in gs), int(m)) for n, gs, m in json.loads(text))
