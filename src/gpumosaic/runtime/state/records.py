"""The service's tables (SQLite schema) and the rows read from them: what a job, a lease
and an event are on disk. ``Store`` (store.py) is the one writer; these are its values."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from gpumosaic.model.job import JobSpec
from gpumosaic.results.outcome import JobEnd, RejectReason
from gpumosaic.runtime.jobs.ends import TERMINAL_STATES, job_end

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    command TEXT NOT NULL,
    steps REAL NOT NULL,
    num_gpu INTEGER NOT NULL,
    gpu_milli INTEGER NOT NULL,
    gpu_models TEXT NOT NULL,          -- '|'-joined upper-case names, '' = any
    priority_weight REAL NOT NULL,
    job_type TEXT NOT NULL,
    workdir TEXT NOT NULL,
    env TEXT NOT NULL,                 -- JSON object
    max_retries INTEGER NOT NULL,
    state TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    rejection TEXT NOT NULL DEFAULT '',  -- a rejected job's RejectReason code ('' otherwise)
    steps_done REAL NOT NULL DEFAULT 0,
    checkpoint_steps REAL NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    exit_code INTEGER,
    log_tail TEXT NOT NULL DEFAULT '',
    attained_s REAL NOT NULL DEFAULT 0,
    gpu_type TEXT NOT NULL DEFAULT '',
    gpu_index TEXT NOT NULL DEFAULT '',
    lease_id TEXT,
    pid INTEGER,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    submitted_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    preemptible INTEGER NOT NULL DEFAULT 1  -- 0: one lease from start to exit
);
CREATE TABLE IF NOT EXISTS leases (
    id TEXT PRIMARY KEY,
    job_id INTEGER NOT NULL REFERENCES jobs(id),
    round INTEGER NOT NULL,
    gpu_type TEXT NOT NULL,
    parts TEXT NOT NULL,               -- JSON [[node, [gpu, ...], milli], ...]
    active INTEGER NOT NULL,
    started_at REAL NOT NULL,
    ended_at REAL,
    end_reason TEXT NOT NULL DEFAULT '',
    exit_code INTEGER,
    pid INTEGER,
    running_at REAL,                   -- the job's first call (its process is running)
    extensions INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS leases_active ON leases(active);
CREATE TABLE IF NOT EXISTS throughputs (
    job_id INTEGER NOT NULL,
    gpu_type TEXT NOT NULL,
    steps_per_s REAL NOT NULL,
    samples INTEGER NOT NULL,
    PRIMARY KEY (job_id, gpu_type)
);
CREATE TABLE IF NOT EXISTS rounds (
    idx INTEGER PRIMARY KEY,
    start_s REAL NOT NULL,
    end_s REAL,
    plan TEXT NOT NULL                 -- JSON [[job ids], gpu_type, extended, steps]
);
CREATE TABLE IF NOT EXISTS service (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    epoch_s REAL NOT NULL              -- time 0 of the scheduler's clock (first start)
);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    t REAL NOT NULL,
    job_id INTEGER,
    kind TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT ''
);
-- A submission's known rates (its prior, steps/s in job time per GPU model). A new
-- table, created on open, so a state file of an older version opens unchanged.
CREATE TABLE IF NOT EXISTS job_rates (
    job_id INTEGER NOT NULL REFERENCES jobs(id),
    gpu_type TEXT NOT NULL,
    steps_per_s REAL NOT NULL,
    PRIMARY KEY (job_id, gpu_type)
);
-- serve --mechanism gandiva only (mechanisms/gandiva/live): a row per job Gandiva touched. A new
-- table, created on open, so a state file of an older version opens unchanged.
CREATE TABLE IF NOT EXISTS gandiva_jobs (
    job_id INTEGER PRIMARY KEY REFERENCES jobs(id),
    suspensions INTEGER NOT NULL DEFAULT 0,
    migrations INTEGER NOT NULL DEFAULT 0,
    packed_with INTEGER                -- the job it shares its GPU with now, if any
);
"""


@dataclass(frozen=True, slots=True)
class JobRow:
    id: int
    name: str
    command: str
    steps: float
    num_gpu: int
    gpu_milli: int
    gpu_models: tuple[str, ...]
    priority_weight: float
    job_type: str
    workdir: str
    env: tuple[tuple[str, str], ...]
    max_retries: int
    state: str
    reason: str
    steps_done: float
    checkpoint_steps: float
    attempts: int
    exit_code: int | None
    log_tail: str
    attained_s: float
    gpu_type: str
    gpu_index: str
    lease_id: str | None
    pid: int | None
    cancel_requested: bool
    submitted_at: float
    started_at: float | None
    finished_at: float | None
    rejection: str = ""  # a rejected job's RejectReason code
    preemptible: bool = True  # False: runs as one lease to its exit (JobSubmission's)

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def end(self) -> JobEnd:
        """How the job ended (or stands), typed (``runtime.jobs.ends``)."""
        return job_end(self.state, self.reason, self.rejection, self.started_at is not None)

    def spec(self, arrival_s: float) -> JobSpec:
        """The job as the decider sees it (arriving at ``arrival_s`` on its clock)."""
        return JobSpec(
            id=self.id,
            arrival_s=max(arrival_s, 0.0),
            job_type=self.job_type or "job",
            num_gpu=self.num_gpu,
            gpu_milli=self.gpu_milli,
            work=self.steps,
            allowed_models=frozenset(self.gpu_models) or None,
            priority_weight=self.priority_weight,
            name=self.name,
            # A live job's ranks meet over torch.distributed's env:// rendezvous (rank 0's
            # address): a multi-GPU job may span Ray nodes, as Gavel's jobs may.
            may_span_nodes=True,
        )


@dataclass(frozen=True, slots=True)
class LeaseRow:
    id: str
    job_id: int
    round: int
    gpu_type: str
    parts: tuple[tuple[int, tuple[int, ...], int], ...]
    active: bool
    started_at: float
    ended_at: float | None
    end_reason: str
    exit_code: int | None
    pid: int | None
    extensions: int
    running_at: float | None


@dataclass(frozen=True, slots=True)
class GandivaJobRow:
    """What Gandiva did to one job (``serve --mechanism gandiva``), kept across restarts."""

    job_id: int
    suspensions: int = 0
    migrations: int = 0
    packed_with: int | None = None


@dataclass(frozen=True, slots=True)
class EventRow:
    seq: int
    t: float
    job_id: int | None
    kind: str
    detail: str


def job_row(r: sqlite3.Row) -> JobRow:
    return JobRow(
        id=r["id"],
        name=r["name"],
        command=r["command"],
        steps=r["steps"],
        num_gpu=r["num_gpu"],
        gpu_milli=r["gpu_milli"],
        gpu_models=tuple(m for m in r["gpu_models"].split("|") if m),
        priority_weight=r["priority_weight"],
        job_type=r["job_type"],
        workdir=r["workdir"],
        env=tuple(sorted(json.loads(r["env"]).items())),
        max_retries=r["max_retries"],
        state=r["state"],
        reason=r["reason"],
        steps_done=r["steps_done"],
        checkpoint_steps=r["checkpoint_steps"],
        attempts=r["attempts"],
        exit_code=r["exit_code"],
        log_tail=r["log_tail"],
        attained_s=r["attained_s"],
        gpu_type=r["gpu_type"],
        gpu_index=r["gpu_index"],
        lease_id=r["lease_id"],
        pid=r["pid"],
        cancel_requested=bool(r["cancel_requested"]),
        submitted_at=r["submitted_at"],
        started_at=r["started_at"],
        finished_at=r["finished_at"],
        rejection=r["rejection"],
        preemptible=bool(r["preemptible"]),
    )


def add_missing_columns(db: sqlite3.Connection) -> None:
    """Bring a state file of an older version up to ``SCHEMA``: its jobs table gets the
    ``rejection`` column, filled from the words its rejected jobs kept (``code: detail``,
    as ``Rejection`` wrote them), once."""
    columns = {r[1] for r in db.execute("PRAGMA table_info(jobs)").fetchall()}
    if "preemptible" not in columns:
        db.execute("ALTER TABLE jobs ADD COLUMN preemptible INTEGER NOT NULL DEFAULT 1")
    if "rejection" in columns:
        return
    db.execute("BEGIN IMMEDIATE")  # the column and its values, or neither
    try:
        db.execute("ALTER TABLE jobs ADD COLUMN rejection TEXT NOT NULL DEFAULT ''")
        for code in RejectReason:
            prefix = f"{code.value}: "
            db.execute(
                "UPDATE jobs SET rejection = ? WHERE state = 'rejected' "
                "AND substr(reason, 1, ?) = ?",
                (code.value, len(prefix), prefix),
            )
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def lease_row(r: sqlite3.Row) -> LeaseRow:
    parts = tuple(
        (int(n), tuple(int(g) for g in gs), int(m)) for n, gs, m in json.loads(r["parts"])
    )
    return LeaseRow(
        id=r["id"],
        job_id=r["job_id"],
        round=r["round"],
        gpu_type=r["gpu_type"],
        parts=parts,
        active=bool(r["active"]),
        started_at=r["started_at"],
        ended_at=r["ended_at"],
        end_reason=r["end_reason"],
        exit_code=r["exit_code"],
        pid=r["pid"],
        extensions=r["extensions"],
        running_at=r["running_at"],
    )
