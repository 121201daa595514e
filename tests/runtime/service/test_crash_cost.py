"""Checkpoints bound the crash cost, end to end: an emulated job (``lease.steps(save=...)``
every 1 s) in rounds of 60 s (one long lease, no extension within the test), the service
SIGKILLed mid-round and restarted on the same state: the job resumes from a checkpoint at
most about one interval behind the steps it had reported, not from the round's start."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pytest
from rounds_support import wait_for
from test_restart import free_port, read, up

from gpumosaic.experiments.sim_vs_live.replay import emulate_command
from gpumosaic.runtime.api.client import ServiceClient

RATE = 7.18  # A3C on a V100, Gavel's table (steps/s)


def serve(state: Path, port: int, gcs: str):  # type: ignore[no-untyped-def]
    import os
    import subprocess

    src = str(Path(__file__).parents[3] / "src")
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": src}
    cmd = [
        sys.executable, "-m", "gpumosaic.cli", "serve", "--ray-address", gcs, "--cluster",
        "v100:1", "--round-s", "60", "--grace-s", "2", "--state", str(state), "--port",
        str(port), "--warm-launchers",
    ]  # fmt: skip
    out = open(state.parent / f"serve-{time.monotonic_ns()}.log", "wb")  # noqa: SIM115
    return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)


@pytest.mark.slow
def test_a_sigkill_costs_at_most_one_checkpoint_interval(ray_cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    gcs = ray_cluster.get_runtime_context().gcs_address  # type: ignore[attr-defined]
    state = tmp_path / "state" / "state.db"
    state.parent.mkdir()
    port = free_port()
    client = ServiceClient(f"http://127.0.0.1:{port}")
    first = serve(state, port, gcs)
    body = {
        "command": emulate_command("A3C"),
        "steps": 100_000,
        "job_type": "A3C",
        "env": {"GPUMOSAIC_CHECKPOINT_EVERY_S": "1"},
    }
    try:
        wait_for(lambda: up(client, first), 60, "the service to start")
        job = client.submit(body)
        wait_for(lambda: client.job(job)["steps_done"] > 8 * RATE, 60, "the job to step")
        reported = client.job(job)["steps_done"]  # its last report (at most 1 s old)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    checkpoint = read(state, f"SELECT checkpoint_steps FROM jobs WHERE id = {job}")[0][0]
    assert checkpoint > 0  # saved by the loop's own cadence: the lease never ended
    # Redone after the restart: what it reported past its checkpoint, at most one
    # interval (1 s) of steps plus a report's age and scheduling slack.
    assert reported - checkpoint <= 3 * RATE, (reported, checkpoint)
    second = serve(state, port, gcs)
    try:
        wait_for(lambda: up(client, second), 60, "the service to restart")
        wait_for(lambda: client.job(job)["steps_done"] > reported, 60, "the job to resume")
        assert client.job(job)["checkpoint_steps"] >= checkpoint
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=30)
