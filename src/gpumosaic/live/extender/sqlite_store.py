"""Standalone mode: nodes from a cluster description, binds recorded in SQLite.

For dry runs beside a cluster, for ``extender replay`` and for the tests. A bound pod is
stored as the API JSON a real cluster would hold after our bind (annotations included),
and the service rebuilds from it with the same code as from the API server. The random
generator's state is stored with every bind, so a restarted extender continues the same
stream of decisions. Several extender processes must not share one file.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from gpumosaic.errors import InputError
from gpumosaic.live.extender.backend import BindError, RngState, Snapshot
from gpumosaic.live.extender.vocabulary import NodeReading, PodRequest, pod_object
from gpumosaic.model.cluster import ClusterSpec

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pods (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL UNIQUE,
    node TEXT NOT NULL,
    pod TEXT NOT NULL
);
"""


class SqliteBackend:
    kind = "sqlite"
    releases_by_request = True

    def __init__(self, cluster: ClusterSpec, path: str | Path, cluster_label: str) -> None:
        self.cluster = cluster
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(
                str(self.path), check_same_thread=False, isolation_level=None
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)
        except sqlite3.Error as err:
            raise InputError(f"cannot open the state database: {err}", path=self.path) from None
        recorded = self._meta("cluster")
        if recorded is None:
            self._set_meta("cluster", cluster_label)
        elif recorded != cluster_label:
            raise InputError(
                f"this state database belongs to --cluster {recorded!r}, not {cluster_label!r}; "
                "use another --db or the same cluster",
                path=self.path,
            )

    def _meta(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _set_meta(self, key: str, value: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def load(self) -> Snapshot:
        with self._lock:
            rows = self._db.execute("SELECT pod FROM pods ORDER BY seq").fetchall()
        initial, current = self._meta("rng_initial"), self._meta("rng_current")
        return Snapshot(
            nodes=tuple(NodeReading(n, False) for n in self.cluster.nodes),
            pods=tuple(json.loads(r[0]) for r in rows),
            rng_initial=None if initial is None else json.loads(initial),
            rng_current=None if current is None else json.loads(current),
        )

    def save_rng_initial(self, state: RngState) -> None:
        self._set_meta("rng_initial", json.dumps(state))

    def bind(
        self, request: PodRequest, node: str, annotations: dict[str, str], rng_state: RngState
    ) -> None:
        pod: dict[str, Any] = pod_object(
            request.job(0), request.name, request.namespace, request.uid
        )
        pod["metadata"]["annotations"].update(annotations)
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Running"}
        try:
            with self._lock:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    self._db.execute(
                        "INSERT INTO pods (key, node, pod) VALUES (?, ?, ?)",
                        (request.key, node, json.dumps(pod)),
                    )
                    self._db.execute(
                        "INSERT OR REPLACE INTO meta VALUES ('rng_current', ?)",
                        (json.dumps(rng_state),),
                    )
                    self._db.execute("COMMIT")
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
        except sqlite3.Error as err:
            raise BindError(f"state database: {err}") from None

    def release(self, key: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM pods WHERE key = ?", (key,))

    def read_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None  # no API server: only pods this process filtered can be bound

    def close(self) -> None:
        with self._lock:
            self._db.close()
