"""One writer per state database: a second extender refuses at once naming the holder;
two writers that bypass the lock still cannot over-commit a GPU (the capacity is checked
again inside the recording transaction); a damaged or read-only database is one line at
start; a database that stops being writable makes /healthz unhealthy and every write a
503 with the state unchanged, here and after a restart."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from extender_builders import app_client, args, binding, cluster, service, v1_pod

from gpumosaic.apps.extender.service import ExtenderService
from gpumosaic.apps.extender.sqlite_store import SqliteBackend, WriterLock
from gpumosaic.apps.extender.target import TargetSource
from gpumosaic.apps.extender.wire import ExtenderArgs, ExtenderBindingArgs
from gpumosaic.errors import InputError
from waiting import wait_for

SRC = str(Path(__file__).resolve().parents[3] / "src")


def test_a_second_writer_is_refused_naming_the_holder(tmp_path: Path) -> None:
    spec = cluster(("V100", 1))
    first = SqliteBackend(spec, tmp_path / "s.db", "c")
    holder = rf"in use by gpumosaic extender pid {os.getpid()} on \S+ since 20"
    with pytest.raises(InputError, match=holder):
        SqliteBackend(spec, tmp_path / "s.db", "c")
    first.close()
    SqliteBackend(spec, tmp_path / "s.db", "c").close()  # free again once closed


def _unfenced(spec, db: Path) -> ExtenderService:
    source = TargetSource(None, 10, 5)
    backend = SqliteBackend(spec, db, "test-cluster", lock=False)
    return ExtenderService(backend, "bestfit", source)


def test_two_writers_racing_cannot_put_1200_milli_on_one_gpu(tmp_path: Path) -> None:
    """Two extenders on one file with the lock bypassed (two connections), each sure
    the GPU is empty: the transaction's own check lets exactly one 600-milli pod in."""
    spec = cluster(("V100", 1))
    a, b = _unfenced(spec, tmp_path / "s.db"), _unfenced(spec, tmp_path / "s.db")
    pods = [v1_pod(milli=600), v1_pod(milli=600)]
    for svc, pod in zip((a, b), pods, strict=True):
        svc.filter(ExtenderArgs.model_validate(args(pod, ["n0"])))
        assert (
            max(s["Score"] for s in svc.prioritize(ExtenderArgs.model_validate(args(pod, ["n0"]))))
            == 10
        )
    barrier = threading.Barrier(2)
    errors: list[str] = []

    def bind(svc: ExtenderService, pod) -> None:
        barrier.wait()
        errors.append(svc.bind(ExtenderBindingArgs.model_validate(binding(pod, "n0")))["Error"])

    threads = [threading.Thread(target=bind, args=p) for p in zip((a, b), pods, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(bool(e) for e in errors) == [False, True]
    assert "no room" in next(e for e in errors if e)
    for svc in (a, b):
        svc.backend.close()  # type: ignore[attr-defined]
    again = service(spec, tmp_path / "s.db")  # the record holds one pod, 600 milli
    assert len(again.held()) == 1 and int(again.nodes.state.gpu_free[0, 0]) == 400
    again.check_invariants()


def test_a_damaged_database_is_one_line(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    db.write_bytes(b"this is not SQLite" * 100)
    with pytest.raises(InputError, match="cannot use the state database: file is not a database"):
        SqliteBackend(cluster(("V100", 1)), db, "c")
    WriterLock(db).release()  # the failed start let go of the lock
    SqliteBackend(cluster(("V100", 1)), tmp_path / "t.db", "test-cluster").close()
    db2 = tmp_path / "t.db"
    import sqlite3

    with sqlite3.connect(db2) as raw:
        raw.execute("INSERT INTO pods (key, node, pod) VALUES ('k', 'n0', '{broken')")
    with pytest.raises(InputError, match="the state database is damaged"):
        service(cluster(("V100", 1)), db2)


def test_a_read_only_database_is_one_line_at_start(tmp_path: Path, monkeypatch) -> None:
    """A file the extender's user cannot write. Root writes any file, so as root the
    connection is opened read-only instead (the same SQLite error either way)."""
    import sqlite3

    from typer.testing import CliRunner

    from gpumosaic.apps.extender import sqlite_store
    from gpumosaic.cli import app

    db = tmp_path / "s.db"
    SqliteBackend(cluster(("V100", 1)), db, "v100:1").close()
    db.chmod(0o444)
    if os.geteuid() == 0:
        connect = sqlite3.connect

        def read_only(*a, **kw):  # type: ignore[no-untyped-def]
            conn = connect(*a, **kw)
            conn.execute("PRAGMA query_only = ON")
            return conn

        monkeypatch.setattr(sqlite_store.sqlite3, "connect", read_only)
    args = ["extender", "--port", "0", "--cluster", "v100:1", "--db", str(db)]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 2
    lines = [ln for ln in out.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in out.output
    assert str(db) in lines[0] and "readonly database" in lines[0], lines


def test_an_unwritable_database_is_503_and_unhealthy_and_the_pod_stays(tmp_path: Path) -> None:
    spec = cluster(("V100", 1))
    svc = service(spec, tmp_path / "s.db")
    c = app_client(svc)
    held, later = v1_pod(milli=300, name="held"), v1_pod(milli=300, name="later")
    for pod in (held, later):
        c.post("/filter", json=args(pod, ["n0"]))
    assert c.post("/bind", json=binding(held, "n0")).json() == {"Error": ""}
    assert c.get("/healthz").status_code == 200
    backend = svc.backend
    assert isinstance(backend, SqliteBackend)
    backend._db.execute("PRAGMA query_only = ON")  # every write now fails: read-only
    r = c.delete("/pods/team-a/held")
    assert r.status_code == 503 and "cannot be written" in r.json()["Error"]
    assert c.get("/healthz").status_code == 503
    assert c.get("/healthz").json()["reason"].startswith("the state database cannot be written")
    r = c.post("/bind", json=binding(later, "n0"))
    assert r.status_code == 503 and "readonly" in r.json()["Error"]
    assert len(svc.held()) == 1 and int(svc.nodes.state.gpu_free[0, 0]) == 700  # unchanged
    backend._db.execute("PRAGMA query_only = OFF")
    # The health probe runs at most once a second: healthy again at its next run.
    wait_for(
        lambda: c.get("/healthz").status_code, 120, "/healthz to recover", until=lambda s: s == 200
    )
    backend.close()
    again = service(spec, tmp_path / "s.db")  # the refused DELETE did not happen: held
    assert [r.name for r, _, _ in again.held()] == ["held"]
    assert app_client(again).delete("/pods/team-a/held").status_code == 200
    again.backend.close()  # type: ignore[attr-defined]
    assert service(spec, tmp_path / "s.db").held() == []  # an answered DELETE stays done


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def extender_process(db: Path, port: int, nodes: str = "v100:2") -> subprocess.Popen[str]:
    command = [
        sys.executable, "-c", "from gpumosaic.cli import main; main()", "extender",
        "--cluster", nodes, "--db", str(db), "--port", str(port), "--log-level", "warning",
        "--placement", "bestfit",
    ]  # fmt: skip
    return subprocess.Popen(
        command,
        env={**os.environ, "PYTHONPATH": SRC},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_healthy(url: str, proc: subprocess.Popen[str], timeout_s: float = 40.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(
                f"the extender exited: {proc.stderr.read() if proc.stderr else ''}"
            )
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError("the extender did not start")


@pytest.mark.slow
def test_a_second_extender_process_refuses_at_once(tmp_path: Path) -> None:
    port = _free_port()
    first = extender_process(tmp_path / "s.db", port)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", first)
        second = extender_process(tmp_path / "s.db", _free_port())
        _, err = second.communicate(timeout=60)
        assert second.returncode == 2
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert len(lines) == 1, err
        assert f"in use by gpumosaic extender pid {first.pid} on" in lines[0]
        assert "since" in lines[0]
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200  # untouched
    finally:
        first.terminate()
        first.wait(30)
