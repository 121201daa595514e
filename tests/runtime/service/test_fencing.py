"""One writer per state (issue 23, item 4): a second service on the same ``--state`` is
refused at once with one line naming the holder; a damaged or unwritable state file is
one line at start; ``/healthz`` turns unhealthy when the state can no longer be
written, and a write then answers 503, not 500."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from rounds_support import wait_for

from gpumosaic.errors import InputError
from gpumosaic.run.serve import ServeDescription, open_state
from gpumosaic.runtime.state.store import Store

SRC = str(Path(__file__).parents[3] / "src")


def serve(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC, "RAY_AUTH_MODE": "disabled"}
    cmd = [sys.executable, "-m", "gpumosaic.cli", "serve", "--cluster", "v100:1", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def one_line(result: subprocess.CompletedProcess[str], *words: str) -> str:
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert result.returncode == 2, result.stdout + result.stderr
    assert len(lines) == 1, lines
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def test_a_second_service_on_the_same_state_refuses_at_once(api_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    first = api_factory(state=str(tmp_path / "s" / "state.db"))
    with pytest.raises(InputError, match=f"in use by gpumosaic serve pid {os.getpid()}"):
        open_state(ServeDescription(state=str(tmp_path / "s" / "state.db")))
    line = one_line(serve("--state", str(tmp_path / "s" / "state.db")), "--state", "in use")
    assert first.url in line  # the holder, with its address
    first.stop()
    lock, store = open_state(ServeDescription(state=str(tmp_path / "s" / "state.db")))
    store.close()
    lock.release()


def test_a_damaged_state_file_is_one_line(tmp_path: Path) -> None:
    state = tmp_path / "state.db"
    state.write_bytes(b"this is not a database" * 100)
    one_line(serve("--state", str(state)), "--state", "cannot open it")


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """``path`` unwritable for this process: chmod, or (root ignores modes) the
    immutable attribute where the file system has it."""
    if os.geteuid() != 0:
        path.chmod(0o444)
        try:
            yield
        finally:
            path.chmod(0o644)
        return
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(path)]).returncode:
        pytest.skip("running as root without chattr +i: nothing makes the file read-only")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_a_read_only_state_file_is_one_line(tmp_path: Path) -> None:
    state = tmp_path / "state.db"
    store = Store(state)
    store.epoch(1.0)
    store.close()
    with read_only(state):
        one_line(serve("--state", str(state)), "--state", "cannot")


def test_an_unwritable_state_turns_healthz_unhealthy(api_factory) -> None:  # type: ignore[no-untyped-def]
    svc = api_factory(round_s=600.0)

    def health() -> int:
        try:
            with urllib.request.urlopen(svc.url + "/healthz", timeout=60) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as err:
            return err.code

    assert health() == 200
    # What a read-only remount or a full disk does to the open database (SQLITE_READONLY).
    svc.store._db.execute("PRAGMA query_only = ON")
    wait_for(lambda: health() == 503, 120, "/healthz to report the unwritable state")
    req = urllib.request.Request(
        svc.url + "/v1/jobs",
        data=json.dumps({"command": "x", "steps": 1}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=60)
    assert err.value.code == 503
    svc.store._db.execute("PRAGMA query_only = OFF")
    wait_for(lambda: health() == 200, 120, "/healthz to recover")
    with pytest.raises(sqlite3.OperationalError):  # the store itself refuses, it is not hidden
        svc.store._db.execute("PRAGMA query_only = ON")
        svc.store.probe_write()
    svc.store._db.execute("PRAGMA query_only = OFF")
