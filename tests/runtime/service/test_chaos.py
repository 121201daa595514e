"""SIGKILL/restart loop (issue 23, item 9): a service process is killed with SIGKILL
at arbitrary moments and restarted on the same state, again and again; no acknowledged
job is lost and no job ever holds two leases at once. Without Ray (the in-process
executor in a process of its own), so it is bounded: three kills, well under a minute."""

from __future__ import annotations

import itertools
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from rounds_support import wait_for

from gpumosaic.errors import InputError
from gpumosaic.runtime.api.client import ServiceClient

HERE = Path(__file__).parent
SRC = str(HERE.parents[2] / "src")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(state: Path, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, str(HERE)])}
    cmd = [sys.executable, str(HERE / "jobs" / "inproc_serve.py"), str(state), str(port)]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def up(client: ServiceClient) -> bool:
    try:
        client.request("GET", "/healthz")
        return True
    except InputError:
        return False


@pytest.mark.slow
def test_sigkill_restart_loop_loses_nothing_runs_nothing_twice(tmp_path: Path) -> None:
    rng = np.random.default_rng(23)
    state = tmp_path / "state.db"
    port = free_port()
    client = ServiceClient(f"http://127.0.0.1:{port}", timeout_s=10)
    acknowledged: list[int] = []
    proc = start(state, port)
    try:
        for _kill in range(3):
            wait_for(lambda: up(client), 120, "the service to start")
            for _ in range(int(rng.integers(5, 15))):
                acknowledged.append(client.submit({"command": "train", "steps": 300}))
            time.sleep(float(rng.uniform(0.2, 1.5)))  # mid-round, leases alive
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            proc = start(state, port)
        wait_for(lambda: up(client), 120, "the last restart")
        wait_for(
            lambda: all(j["state"] == "done" for j in client.jobs()),
            120,
            "every job done",
            lambda: str([(j["id"], j["state"], j["steps_done"]) for j in client.jobs()]),
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    with sqlite3.connect(state) as db:
        rows = db.execute("SELECT id, state, steps_done FROM jobs ORDER BY id").fetchall()
        leases = db.execute(
            "SELECT job_id, started_at, COALESCE(ended_at, 1e18) FROM leases "
            "ORDER BY job_id, started_at"
        ).fetchall()
    assert [r[0] for r in rows] == acknowledged  # 0 lost
    assert all(state == "done" and steps == 300 for _, state, steps in rows), rows
    for a, b in itertools.pairwise(leases):  # 0 run twice at once
        if a[0] == b[0]:
            assert a[2] <= b[1], (a, b)
