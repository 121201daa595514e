"""``serve`` against a Ray head with token authentication (issue 23 item 8, issue 28):
without the token it is one line that says how to pass it (bounded by
``--ray-timeout-s``), with ``--ray-token-file`` it connects and serves. The head is a
real ``ray start --head --block`` with ``RAY_AUTH_MODE=token``, in a home directory of
its own, stopped by killing exactly its process tree."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from rounds_support import wait_for

from gpumosaic.errors import InputError
from gpumosaic.runtime.api.client import ServiceClient
from gpumosaic.runtime.executors.ray_connect import LOOPBACK_ENV

SRC = str(Path(__file__).parents[3] / "src")
RAY = str(Path(sys.executable).parent / "ray")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env[LOOPBACK_ENV] = "0"  # one head, on 127.0.0.1 only (ray_connect.init_local_ray)
    return {**env, "HOME": str(home), "PYTHONPATH": SRC, "RAY_USAGE_STATS_ENABLED": "0"}


@pytest.fixture
def token_head(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    if not Path(RAY).exists():
        pytest.skip("no ray executable")
    home = tmp_path / "home"
    home.mkdir()
    token = secrets.token_hex(16)
    token_file = tmp_path / "ray-token"
    token_file.write_text(token)
    port = free_port()
    ray_dir = tempfile.mkdtemp(prefix="gm-ray-", dir="/tmp")  # socket paths <= 107 bytes
    env = {**clean_env(home), "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}
    cmd = [
        RAY, "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={port}",
        "--num-cpus=1", "--num-gpus=1",
        '--resources={"gpumosaic_model_V100": 1}', "--include-dashboard=false",
        "--disable-usage-stats", f"--temp-dir={ray_dir}",
    ]  # fmt: skip
    head = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: _listening(port), 60, "the Ray head to listen")
        yield f"127.0.0.1:{port}", token_file
    finally:
        for pid in [*reversed(descendants(head.pid)), *daemons_of(port), head.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        head.wait(timeout=30)
        shutil.rmtree(ray_dir, ignore_errors=True)


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (from /proc), parents before children."""
    parent_of = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent_of[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    out, frontier = [], [root]
    while frontier:
        children = [p for p, pp in parent_of.items() if pp in frontier]
        out += children
        frontier = children
    return out


def daemons_of(port: int) -> list[int]:
    """Ray's daemons of the head on ``port`` (they leave ``ray start``'s process tree),
    recognised by that head's GCS port in their command line."""
    sign = re.compile(rf"(gcs[-_]address=\S*:{port}\b|gcs_server_port={port}\b|--port={port}\b)")
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if sign.search(cmdline):
                out.append(int(entry.name))
    return out


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def serve(address: str, tmp: Path, *extra: str) -> subprocess.Popen[str]:
    cmd = [
        sys.executable, "-m", "gpumosaic.cli", "serve", "--ray-address", address,
        "--cluster", "v100:1", "--state", str(tmp / "state.db"), "--port", str(free_port()),
        "--ray-timeout-s", "15", *extra,
    ]  # fmt: skip
    return subprocess.Popen(
        cmd, env=clean_env(tmp / "home"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.mark.slow
def test_a_token_head_without_the_token_is_one_line(token_head, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    address, _ = token_head
    proc = serve(address, tmp_path / "a")
    out, err = proc.communicate(timeout=90)
    lines = (out + err).strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, out + err
    assert "--ray-token-file" in lines[0] and "token" in lines[0], lines[0]


@pytest.mark.slow
def test_a_token_head_with_the_token_file_serves(token_head, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    address, token_file = token_head
    proc = serve(address, tmp_path / "b", "--ray-token-file", str(token_file))
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://"), proc.stderr.read() if proc.stderr else ""
        client = ServiceClient(url)

        def healthy() -> bool:
            try:
                return bool(client.request("GET", "/healthz")["ok"])
            except InputError:
                return False

        wait_for(healthy, 120, "the service to answer")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert proc.returncode == 0
