"""SIGKILL the service mid-round and start it again on the same SQLite state: no job is
lost, none runs twice at once, and progress resumes no further back than each job's last
checkpoint. The service runs as its own process (``gpumosaic serve``) on the session's
Ray, exactly as a user would run it."""

from __future__ import annotations

import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rounds_support import job_body, wait_for

from gpumosaic.runtime.api.client import ServiceClient

SRC = str(Path(__file__).parents[3] / "src")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(state: Path, port: int, gcs: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": SRC}
    cmd = [
        sys.executable,
        "-m",
        "gpumosaic.cli",
        "serve",
        "--ray-address",
        gcs,
        "--cluster",
        "v100:2",
        "--round-s",
        "2",
        "--grace-s",
        "2",
        "--state",
        str(state),
        "--port",
        str(port),
        "--policy",
        "max_min_fairness",
    ]
    out = open(state.parent / f"serve-{time.monotonic_ns()}.log", "wb")  # noqa: SIM115
    return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)


def up(client: ServiceClient, proc: subprocess.Popen[bytes]) -> bool:
    assert proc.poll() is None, "gpumosaic serve exited"
    try:
        client.request("GET", "/healthz")
        return True
    except Exception:
        return False


def read(state: Path, query: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(f"file:{state}?mode=ro", uri=True) as db:
        return db.execute(query).fetchall()


@pytest.mark.slow
def test_sigkill_and_restart_lose_nothing(ray_cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    gcs = ray_cluster.get_runtime_context().gcs_address  # type: ignore[attr-defined]
    state = tmp_path / "state" / "state.db"
    state.parent.mkdir()
    port = free_port()
    client = ServiceClient(f"http://127.0.0.1:{port}")
    first = serve(state, port, gcs)
    try:
        wait_for(lambda: up(client, first), 60, "the service to start")
        ids = [client.submit(job_body(400, step_s=0.02)) for _ in range(3)]
        # Three jobs on two GPUs take turns; wait until one has checkpointed mid-way
        # (it was preempted) and another is running.
        wait_for(
            lambda: (
                any(0 < j["checkpoint_steps"] < 400 for j in client.jobs())
                and any(j["state"] == "running" and j["pid"] for j in client.jobs())
            ),
            90,
            "checkpoints and a running lease",
        )
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    checkpoints = dict(read(state, "SELECT id, checkpoint_steps FROM jobs"))
    before = {row[0] for row in read(state, "SELECT id FROM leases")}
    assert read(state, "SELECT COUNT(*) FROM leases WHERE active = 1")[0][0] >= 1

    second = serve(state, port, gcs)
    try:
        wait_for(lambda: up(client, second), 60, "the service to restart")
        wait_for(
            lambda: all(j["state"] == "done" for j in client.jobs()),
            120,
            "all jobs done",
            lambda: "\n".join(
                str(r)
                for r in read(state, "SELECT * FROM leases")
                + read(state, "SELECT id, state, steps_done, checkpoint_steps, reason FROM jobs")
            ),
        )
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=30)
    rows = read(state, "SELECT id, state, steps_done FROM jobs ORDER BY id")
    assert rows == [(i, "done", 400.0) for i in ids]
    ended = [row for row in read(state, "SELECT id, end_reason FROM leases") if row[0] in before]
    assert any(reason == "service restart" for _, reason in ended)
    for i in ids:
        log = (state.parent / "logs" / f"job-{i}.log").read_text()
        assert "TWICE" not in log
        blocks = re.split(r"--- lease (\S+) rank \d+ ---\n", log)[1:]
        after = [
            int(m.group(1))
            for lease, text in zip(blocks[::2], blocks[1::2], strict=True)
            if lease not in before
            for m in [re.search(r"from=(\d+)", text)]
            if m is not None
        ]
        assert after, f"job {i} never ran after the restart"
        assert after[0] >= checkpoints[i], (i, after, checkpoints[i])
