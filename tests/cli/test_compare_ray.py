"""``gpumosaic compare --executor ray``: the comparison's study through the study executor,
each run a Ray task on the test run's one local Ray instance (``ray_cluster``, CPU tasks),
stored as it ends; a rerun skips them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpumosaic.cli import app

ray = pytest.importorskip("ray")
runner = CliRunner()


def _compare(out: Path) -> dict[str, object]:
    args = [
        "compare", "--cluster", "v100:4", "--workload", "gavel:jobs=6,rate=0",
        "--placements", "strided,fgd", "--seeds", "0-1", "--out", str(out),
        "--executor", "ray", "--workers", "2", "--json",
    ]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout[result.stdout.index("{") :]))


@pytest.mark.slow
def test_ray_sweep_stores_every_run_and_a_restart_skips_them(
    tmp_path: Path, ray_cluster: object
) -> None:
    out = tmp_path / "cmp"
    first = _compare(out)
    assert (first["planned"], first["skipped"], first["ran"], first["failed"]) == (4, 0, 4, [])
    assert (out / "experiment.toml").is_file()
    # Interrupted and restarted (here: simply run again): the stored runs are skipped.
    again = _compare(out)
    assert (again["planned"], again["skipped"], again["ran"]) == (4, 4, 0)


def test_ray_address_needs_the_ray_executor(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["compare", "--out", str(tmp_path / "x"), "--ray-address", "127.0.0.1:6379"]
    )
    assert result.exit_code != 0
    assert "--executor ray" in result.output


# ---- issue 28: an unreachable --ray-address is bounded, interruptible and says so ------

COMPARE_ON = [
    "compare", "--cluster", "v100:4", "--workload", "gavel:jobs=4,rate=0", "--placements",
    "fgd", "--seeds", "0", "--executor", "ray",
]  # fmt: skip


def _command(tmp_path: Path, *extra: str) -> list[str]:
    import sys

    return [sys.executable, "-m", "gpumosaic", *COMPARE_ON, "--out", str(tmp_path), *extra]


def _listener() -> tuple[object, int]:
    """A port that accepts connections and never answers (not a Ray head)."""
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    return sock, sock.getsockname()[1]


def test_nothing_listening_is_one_line_at_once(tmp_path: Path) -> None:
    import socket
    import subprocess

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]  # closed again: nothing listens there
    done = subprocess.run(
        _command(tmp_path, "--ray-address", f"127.0.0.1:{port}"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "joining the Ray cluster at" in done.stderr  # the progress line
    assert f"error: --ray-address 127.0.0.1:{port}: cannot reach a Ray head" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_a_head_that_never_answers_times_out(tmp_path: Path) -> None:
    import subprocess

    sock, port = _listener()
    try:
        done = subprocess.run(
            _command(tmp_path, "--ray-address", f"127.0.0.1:{port}", "--ray-timeout-s", "2"),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        sock.close()  # type: ignore[attr-defined]
    assert done.returncode == 2, done.stderr
    assert "no Ray head answered within 2 s" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_sigterm_while_joining_ends_the_command(tmp_path: Path) -> None:
    import signal
    import subprocess
    import time

    sock, port = _listener()
    try:
        process = subprocess.Popen(
            _command(tmp_path, "--ray-address", f"127.0.0.1:{port}", "--ray-timeout-s", "300"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        assert process.stderr is not None
        line = process.stderr.readline()  # the progress line: it is joining now
        assert "joining the Ray cluster" in line and time.monotonic() < deadline
        process.send_signal(signal.SIGTERM)  # while it waits on the join (it said so)
        code = process.wait(timeout=30)  # well before the 300 s bound
    finally:
        sock.close()  # type: ignore[attr-defined]
        if process.poll() is None:
            process.kill()
    assert code == 128 + signal.SIGTERM
    assert "interrupted while joining Ray" in process.stderr.read()


@pytest.mark.slow
def test_ray_prints_the_table_and_figures_of_the_local_executor(
    tmp_path: Path, ray_cluster: object
) -> None:
    # Issue 28: --executor ray printed no table and drew no figures. The same runs give
    # the same rows, whichever executor ran them.
    ray_out = _compare(tmp_path / "ray")
    args = [
        "compare", "--cluster", "v100:4", "--workload", "gavel:jobs=6,rate=0",
        "--placements", "strided,fgd", "--seeds", "0-1", "--out", str(tmp_path / "local"),
        "--workers", "1", "--json",
    ]  # fmt: skip
    local = runner.invoke(app, args)
    assert local.exit_code == 0, local.output
    local_rows = json.loads(local.stdout)["rows"]
    assert ray_out["rows"] == local_rows and len(local_rows) == 2
    for name in ("runs.csv", "compare.png", "timeline.png", "table.json"):
        assert (tmp_path / "ray" / name).stat().st_size > 0, name
    ray_csv = (tmp_path / "ray" / "runs.csv").read_text().splitlines()
    local_csv = (tmp_path / "local" / "runs.csv").read_text().splitlines()
    assert ray_csv[0] == local_csv[0] and len(ray_csv) == len(local_csv) == 5
    rerun = [*args[:-1], "--executor", "ray", "--out", str(tmp_path / "ray")]  # all stored
    table = runner.invoke(app, rerun, terminal_width=200)
    assert table.exit_code == 0, table.output
    assert "avg JCT" in table.output and "reused 4 stored runs" in table.output
