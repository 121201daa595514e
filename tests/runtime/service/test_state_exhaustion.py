"""Exhaustion is a state, not a crash (issue 35, class 2): when every commit fails as on
a full disk, the service says so (/healthz 503 with the cause, /metrics), refuses writes
with a clear 503, keeps its round loop and its jobs, and recovers by itself when the
writes succeed again; the job then finishes with no step it had checkpointed lost."""

from __future__ import annotations

import json
import sqlite3
import urllib.error
import urllib.request
from typing import Any

from rounds_support import explain, wait_for

from gpumosaic.runtime.api.client import ServiceClient

FULL = "database or disk is full"


class FullDisk:
    """The store's connection, with every COMMIT failing while ``full`` is set (what
    SQLite answers on a full disk)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self.full = False
        self.refused = 0

    def execute(self, sql: str, *args: Any) -> Any:
        if self.full and sql == "COMMIT":
            self.refused += 1
            raise sqlite3.OperationalError(FULL)
        return self._db.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def _submit(url: str) -> tuple[int, str]:
    body = json.dumps({"command": "train", "steps": 10}).encode()
    request = urllib.request.Request(url + "/v1/jobs", data=body, method="POST")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_a_full_disk_is_reported_and_survived(api_factory) -> None:  # type: ignore[no-untyped-def]
    svc = api_factory(round_s=0.5)
    disk = FullDisk(svc.store._db)
    svc.store._db = disk
    client = ServiceClient(svc.url)
    job = client.submit({"command": "train", "steps": 400})  # 8 s at 50 steps/s
    wait_for(
        lambda: (svc.store.job(job).checkpoint_steps or 0) > 0,
        30,
        "a first checkpoint",
        explain(svc),
    )
    disk.full = True
    wait_for(lambda: _get(svc.url + "/healthz")[0] == 503, 10, "/healthz 503")
    status, text = _get(svc.url + "/healthz")
    assert FULL in text, text
    status, text = _submit(svc.url)
    assert status == 503 and FULL in text, (status, text)
    seen = disk.refused
    wait_for(
        lambda: disk.refused > seen + 3,
        10,
        "the loop trying again (not dead)",
        lambda: f"error {svc.driver_error!r} refused {disk.refused}",
    )
    assert svc.driver_error is None and svc._threads[1].is_alive()
    metrics = _get(svc.url + "/metrics")[1]
    assert "gpumosaic_state_writable 0" in metrics, metrics
    disk.full = False
    wait_for(lambda: _get(svc.url + "/healthz")[0] == 200, 10, "/healthz 200 again")
    wait_for(lambda: client.job(job)["state"] == "done", 60, "the job done", explain(svc))
    assert client.job(job)["attempts"] == 0
    assert _submit(svc.url)[0] == 201
    assert "gpumosaic_state_write_failures_total 1" in _get(svc.url + "/metrics")[1]
