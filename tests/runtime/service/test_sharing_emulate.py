"""An emulated job under the share runtime (``runtime/emulate.py``, ``run_shared``): its steps
are kernels on the stand-in libcuda through the real interposer and a real share daemon,
so the daemon's quanta serialize two such jobs (anti-thrashing on), and with the lock
off they run at once, queueing on the stand-in's shared device clock."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpumosaic.runtime.share.native import library_path
from waiting import wait_for

pytestmark = pytest.mark.slow

# The job: ``run_shared`` with a stand-in lease (steps in strides, a stepping clock), at
# RATE steps per wall second for STEPS steps; prints the GPU-call time it measured.
JOB = """
import os, sys, time
from gpumosaic.runtime import emulate

class Lease:
    chunk = 1
    def steps(self, start, save, stride):
        self.t0 = time.monotonic()
        s = start
        while s < STEPS:
            self.chunk = min(stride, STEPS - s)
            yield s
            s += self.chunk
    def stepping_s(self):
        return time.monotonic() - self.t0
    def save(self, state):
        pass

RATE, STEPS = float(sys.argv[1]), int(sys.argv[2])
rate = emulate.EmulatedRate("A3C", "V100", 1, RATE)
sys.exit(emulate.run_shared(Lease(), rate, {"step": 0}, RATE, dict(os.environ)))
"""


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="gm-emu-", dir="/tmp"))  # sun_path <= 107 bytes
    (root / "s").mkdir(mode=0o700)
    yield root / "s"
    shutil.rmtree(root, ignore_errors=True)


Events = list[dict[str, object]]


def run_pair(sock_dir: Path, mode: str, tmp_path: Path) -> tuple[list[int], Events]:
    """Two emulated jobs on GPU 0 under a daemon in ``mode``; the pids of their kernel
    launches in order, and the daemon's events."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    events = tmp_path / f"events-{mode}.jsonl"
    daemon = subprocess.Popen(
        [
            sys.executable, "-m", "gpumosaic", "share", "daemon", "--socket-dir", str(sock_dir),
            "--gpus", "0", "--tq", "0.2", "--anti-thrashing", mode, "--event-log", str(events),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        socket = sock_dir / "gpu0.sock"
        wait_for(lambda: socket.exists() or daemon.poll() is not None, 60, f"the daemon's {socket}")
        assert daemon.poll() is None, "the daemon exited"
        calls = tmp_path / f"calls-{mode}.log"
        job_env = {
            **env,
            "LD_PRELOAD": str(library_path("interposer")),
            "GPUMOSAIC_SHARE_SOCKET": str(socket),
            "GPUMOSAIC_SHARE_RESERVE_MIB": "0",
            "FAKECUDA_LOG": str(calls),
        }
        job = [sys.executable, "-c", JOB, "400", "800"]  # 2 s of steps alone
        procs = [subprocess.Popen(job, env=job_env, stdout=subprocess.PIPE) for _ in range(2)]
        for p in procs:
            out, _ = p.communicate(timeout=60)
            assert p.returncode == 0, out
            assert b"under the share runtime" in out
    finally:
        daemon.terminate()
        daemon.wait(timeout=15)
    launches = [
        int(line.split()[1])
        for line in calls.read_text().splitlines()
        if line.split()[2:3] == ["cuLaunchKernel"]
    ]
    assert (sock_dir / "gpu0.sock.device").exists()  # the jobs' shared device clock
    return launches, [json.loads(line) for line in events.read_text().splitlines()]


def switches(pids: list[int]) -> int:
    return sum(1 for a, b in itertools.pairwise(pids) if a != b)


def test_the_daemons_quanta_serialize_two_emulated_jobs(sock_dir: Path, tmp_path: Path) -> None:
    launches, events = run_pair(sock_dir, "on", tmp_path)
    assert len(set(launches)) == 2
    handovers = sum(1 for e in events if e["event"] == "LOCK_OK" and e.get("handover"))
    # 4 s of work together at TQ 0.2 s: the GPU changed hands about every quantum ...
    assert handovers >= 6
    # ... and only then: the jobs' kernels come in runs, one holder at a time.
    assert switches(launches) <= handovers + 1
    assert len(launches) > 10 * switches(launches)


def test_with_the_lock_off_two_emulated_jobs_run_at_once(sock_dir: Path, tmp_path: Path) -> None:
    launches, events = run_pair(sock_dir, "off", tmp_path)
    assert not any(e["event"] == "LOCK_OK" for e in events)
    # Both launch all along, their kernels alternating on the one device.
    assert switches(launches) > len(launches) // 4
