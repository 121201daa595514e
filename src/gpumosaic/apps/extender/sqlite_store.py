"""Standalone mode: nodes from a cluster description, binds recorded in SQLite.

For dry runs beside a cluster, for ``extender replay`` and for the tests. A bound pod is
stored as the API JSON a real cluster would hold after our bind (annotations included),
and the service rebuilds from it with the same code as from the API server. The random
generator's state is stored with every bind, so a restarted extender continues the same
stream of decisions.

One writer: the file is fenced by an exclusive lock (``WriterLock``, an flock on the
database file itself, so any path to it reaches the same lock, that the kernel drops when
the process dies, SIGKILL included); a second extender on the same file, by whatever
name, refuses at start with one line naming the holder. Behind the
lock, every bind re-checks the node's capacity against the recorded pods inside the same
``BEGIN IMMEDIATE`` transaction that records it, so even two writers that bypassed the
lock could never put more than 1,000 milli on a GPU. A database that cannot be written
is one line at start; one that stops being writable while running makes /healthz
unhealthy and every write a ``StateUnavailable`` (HTTP 503), with the state unchanged.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from gpumosaic.apps.extender.admission import AdmissionError, gpu_indices
from gpumosaic.apps.extender.backend import BindError, RngState, Snapshot, StateUnavailable
from gpumosaic.apps.extender.vocabulary import (
    GPU_INDEX,
    NodeReading,
    PodRequest,
    bound_pod,
    pod_object,
)
from gpumosaic.errors import InputError
from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.runtime.state.fencing import FileInUse, HeldFile, hold_file

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pods (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL UNIQUE,
    node TEXT NOT NULL,
    pod TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS pods_node ON pods (node);
"""
BUSY_TIMEOUT_S = 2.0  # a write waits this long for another connection's transaction
HEALTH_PROBE_S = 1.0  # /healthz writes a heartbeat at most this often


class WriterLock:
    """The one-writer lock on the database file itself (``fencing.hold_file``: any path to
    the same file reaches the same lock), refusals as one ``InputError`` naming the
    holder. Released by ``release`` or by the kernel when the process ends."""

    def __init__(self, db: Path) -> None:
        try:
            self._held: HeldFile | None = hold_file(db, "gpumosaic extender")
        except FileInUse as err:
            raise InputError(
                f"the state database is in use by {err.holder}; stop that extender or use "
                "another --db (one writer per database)",
                path=db,
            ) from None
        except OSError as err:
            raise InputError(
                f"cannot open the state database: {err.strerror or err}", path=db
            ) from None
        self.holder = self._held.holder

    def release(self) -> None:
        if self._held is not None:
            self._held.release()
            self._held = None


class SqliteBackend:
    kind = "sqlite"
    releases_by_request = True

    def __init__(
        self, cluster: ClusterSpec, path: str | Path, cluster_label: str, *, lock: bool = True
    ) -> None:
        """``lock=False`` skips the writer lock: only for tests that race two writers on
        purpose (the transaction's capacity check must still hold)."""
        self.cluster = cluster
        self.path = Path(path)
        self._nodes = {n.name: n for n in cluster.nodes}
        self._lock = threading.Lock()
        self._problem = ""
        self._probed = 0.0
        self.writer_lock = WriterLock(self.path) if lock else None
        try:
            self._db = sqlite3.connect(
                str(self.path), check_same_thread=False, isolation_level=None,
                timeout=BUSY_TIMEOUT_S,
            )  # fmt: skip
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)
            recorded = self._meta("cluster")
            # A real write at start: a read-only file or directory is one line now, not
            # a failed bind later.
            self._write(
                "INSERT OR REPLACE INTO meta VALUES ('writer', ?)",
                (self.writer_lock.holder if self.writer_lock else "unfenced",),
            )
        except sqlite3.Error as err:
            self._abandon()
            raise InputError(f"cannot use the state database: {err}", path=self.path) from None
        if recorded is None:
            self._set_meta("cluster", cluster_label)
        elif recorded != cluster_label:
            self._abandon()
            raise InputError(
                f"this state database belongs to --cluster {recorded!r}, not {cluster_label!r}; "
                "use another --db or the same cluster",
                path=self.path,
            )

    def _abandon(self) -> None:
        if self.writer_lock is not None:
            self.writer_lock.release()

    def _write(self, sql: str, params: tuple[Any, ...]) -> None:
        with self._lock:
            self._db.execute(sql, params)

    def _meta(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _set_meta(self, key: str, value: str) -> None:
        try:
            self._write("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))
        except sqlite3.Error as err:
            raise self._unavailable(err) from None

    def _unavailable(self, err: sqlite3.Error) -> StateUnavailable:
        self._problem = f"the state database cannot be written: {err}"
        return StateUnavailable(self._problem)

    def load(self) -> Snapshot:
        try:
            with self._lock:
                rows = self._db.execute("SELECT seq, pod FROM pods ORDER BY seq").fetchall()
            initial, current = self._meta("rng_initial"), self._meta("rng_current")
            pods = tuple(json.loads(r[1]) for r in rows)
            rng = [None if v is None else json.loads(v) for v in (initial, current)]
        except (sqlite3.Error, ValueError) as err:
            raise InputError(f"the state database is damaged: {err}", path=self.path) from None
        return Snapshot(
            nodes=tuple(NodeReading(n, False) for n in self.cluster.nodes),
            pods=pods,
            rng_initial=rng[0],
            rng_current=rng[1],
        )

    def save_rng_initial(self, state: RngState) -> None:
        self._set_meta("rng_initial", json.dumps(state))

    def _check_room(self, request: PodRequest, node: str, annotations: dict[str, str]) -> None:
        """Inside the transaction: the node's recorded pods plus this one fit its capacity
        (BindError if not: another writer got there first)."""
        spec = self._nodes.get(node)
        if spec is None:
            raise BindError(f"node {node} is not in this state database's cluster")
        used = [0] * spec.num_gpus
        cpu = request.cpu_milli
        memory = request.memory_mib
        rows = self._db.execute("SELECT pod FROM pods WHERE node = ?", (node,)).fetchall()
        for (text,) in rows:
            held = bound_pod(json.loads(text))
            if held is None:
                continue
            cpu += held.request.cpu_milli
            memory += held.request.memory_mib
            for g in held.gpus or ():
                used[g] += held.request.gpu_milli
        gpus = gpu_indices(annotations[GPU_INDEX], GPU_INDEX) if request.num_gpu else ()
        for g in gpus:
            if g >= spec.num_gpus:
                raise BindError(f"node {node} has no GPU {g}")
            used[g] += request.gpu_milli
        if max(used, default=0) > MILLI_PER_GPU or cpu > spec.cpu_milli or memory > spec.memory_mib:
            raise BindError(
                f"the recorded state has no room for {request.label} on {node} "
                "(another writer bound there first)"
            )

    def bind(
        self, request: PodRequest, node: str, annotations: dict[str, str], rng_state: RngState
    ) -> None:
        pod: dict[str, Any] = pod_object(
            request.job(0), request.name, request.namespace, request.uid
        )
        pod["metadata"]["annotations"].update(annotations)
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Running"}
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as err:
                raise self._unavailable(err) from None
            try:
                self._check_room(request, node, annotations)
                self._db.execute(
                    "INSERT INTO pods (key, node, pod) VALUES (?, ?, ?)",
                    (request.key, node, json.dumps(pod)),
                )
                self._db.execute(
                    "INSERT OR REPLACE INTO meta VALUES ('rng_current', ?)",
                    (json.dumps(rng_state),),
                )
                self._db.execute("COMMIT")
            except sqlite3.IntegrityError:
                self._rollback()
                raise BindError(f"pod {request.label} is already recorded as bound") from None
            except (BindError, AdmissionError, ValueError) as err:
                self._rollback()
                raise BindError(str(err)) from None
            except sqlite3.Error as err:
                self._rollback()
                raise self._unavailable(err) from None
        self._problem = ""

    def _rollback(self) -> None:
        # The transaction may be gone already (SQLite rolls back itself on some errors).
        with contextlib.suppress(sqlite3.Error):
            self._db.execute("ROLLBACK")

    def release(self, key: str) -> None:
        try:
            self._write("DELETE FROM pods WHERE key = ?", (key,))
        except sqlite3.Error as err:
            raise self._unavailable(err) from None
        self._problem = ""

    def health(self) -> str:
        """'' when a heartbeat write succeeds (probed at most once a second)."""
        now = time.monotonic()
        if now - self._probed < HEALTH_PROBE_S:
            return self._problem
        self._probed = now
        try:
            self._write("INSERT OR REPLACE INTO meta VALUES ('heartbeat', ?)", (str(time.time()),))
        except sqlite3.Error as err:
            self._unavailable(err)
        else:
            self._problem = ""
        return self._problem

    def read_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None  # no API server: only pods this process filtered can be bound

    def close(self) -> None:
        with self._lock:
            self._db.close()
        self._abandon()
