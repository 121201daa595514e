"""gpumosaic share daemon|run|ctl|status|metrics: outputs and one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpumosaic.cli import app
from gpumosaic.runtime.share import native

runner = CliRunner()
WORKER = Path(__file__).with_name("worker.py")


def test_status_json_ctl_and_metrics(share_factory) -> None:
    share = share_factory(tq_s=30.0, mode="auto")
    sock_dir = str(share.daemon.socket_dir)
    a = share.client("--kernels", "1", "--alloc-mib", "100", "--hold-s", "30")
    share.wait_for(lambda: share.status()["clients"], what="a client")
    result = runner.invoke(app, ["share", "status", "--socket-dir", sock_dir, "--json"])
    assert result.exit_code == 0, result.output
    (gpu,) = json.loads(result.output)
    for key in ("gpu", "tq_s", "anti_thrashing", "holder", "waiting", "handovers", "clients"):
        assert key in gpu
    assert gpu["gpu"] == 0 and gpu["tq_s"] == 30.0 and gpu["anti_thrashing"] == "auto"
    assert gpu["holder"] is None and gpu["clients"][0]["pid"] == a.pid
    result = runner.invoke(
        app, ["share", "ctl", "--socket-dir", sock_dir, "--tq", "10", "--anti-thrashing", "on"]
    )
    assert result.exit_code == 0, result.output
    (gpu,) = json.loads(
        runner.invoke(app, ["share", "status", "--socket-dir", sock_dir, "--json"]).output
    )
    assert gpu["tq_s"] == 10.0 and gpu["anti_thrashing"] == "on" and gpu["serialized"]
    table = runner.invoke(app, ["share", "status", "--socket-dir", sock_dir])
    assert table.exit_code == 0 and f"({a.pid})" in table.output
    metrics = runner.invoke(app, ["share", "metrics", "--socket-dir", sock_dir]).output
    assert 'gpumosaic_share_tq_seconds{gpu="0"} 10' in metrics
    assert 'gpumosaic_share_working_set_bytes{gpu="0"} 104857600' in metrics


def test_share_run_sets_the_preload_and_socket(share_factory, libs) -> None:
    share = share_factory(tq_s=0.2, mode="on")
    env = dict(share.env)
    env.pop("LD_PRELOAD")
    env.pop("GPUMOSAIC_SHARE_SOCKET")
    env["PYTHONPATH"] = os.pathsep.join([str(Path(native.__file__).parents[3])])
    cmd = [sys.executable, "-c", "from gpumosaic.cli import main; main()", "share", "run"]
    cmd += ["--socket-dir", str(share.daemon.socket_dir), "--", sys.executable, str(WORKER)]
    proc = subprocess.run([*cmd, "--kernels", "5"], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    events = share.daemon.event_list()
    assert [e["event"] for e in events][:4] == ["REGISTER", "SCHED_ON", "REQ_LOCK", "LOCK_OK"]


def one_line_error(args: list[str], needle: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], result.output


def test_clear_errors(share_factory, tmp_path) -> None:
    empty = str(tmp_path / "nothing")
    one_line_error(["share", "status", "--socket-dir", empty], "no share daemon in")
    one_line_error(["share", "ctl", "--socket-dir", empty, "--tq", "5"], "no share daemon in")
    one_line_error(["share", "run", "--socket-dir", empty, "--", "true"], "no share daemon at")
    one_line_error(["share", "ctl", "--socket-dir", empty], "give --tq and/or --anti-thrashing")
    one_line_error(["share", "daemon", "--anti-thrashing", "maybe"], "must be on, off or auto")
    one_line_error(["share", "daemon", "--gpus", "0,0"], "distinct GPU indices")
    # A stale socket file with no daemon behind it.
    stale = tmp_path / "stale"
    stale.mkdir()
    (stale / "gpu0.sock").write_text("")
    one_line_error(["share", "status", "--socket-dir", str(stale)], "no share daemon at")
    if os.geteuid() != 0:  # root writes anywhere
        share = share_factory()
        sock = share.daemon.socket_dir / "gpu0.sock"
        sock.chmod(0o400)
        one_line_error(["share", "status", "--socket-dir", str(sock.parent)], "is not writable")
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        one_line_error(["share", "daemon", "--socket-dir", str(locked)], "not writable")
    one_line_error(
        ["share", "daemon", "--socket-dir", "/proc/self/nope"], "cannot create socket dir"
    )
    one_line_error(
        ["share", "device-plugin", "--plugin-dir", str(tmp_path / "nope")],
        "no kubelet device-plugin directory",
    )
    one_line_error(["share", "device-plugin", "--slots", "0"], "--slots 0: must be >= 1")
    one_line_error(["share", "device-plugin", "--slots", "1000000000"], "--slots 1000000000:")
    one_line_error(["share", "run", "--gpu", "-1", "--", "true"], "--gpu -1")
    one_line_error(["share", "ctl", "--gpu", "99999", "--tq", "5"], "--gpu 99999")


def test_unloadable_library_is_one_clear_line(share_factory, tmp_path, monkeypatch) -> None:
    share = share_factory()
    bogus = tmp_path / "libgpumosaic_share.so"
    bogus.write_text("not a shared library")
    monkeypatch.setattr("gpumosaic.cli.share.library_path", lambda name="interposer": bogus)
    args = ["share", "run", "--socket-dir", str(share.daemon.socket_dir), "--", "true"]
    one_line_error(args, "cannot load the share interposer")


def test_no_compiler_is_one_clear_line(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CC", "no-such-cc")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(native, "PACKAGED", tmp_path / "none")
    with pytest.raises(native.ShareError, match="no C compiler"):
        native.library_path("interposer")


@pytest.mark.slow  # compiles the C libraries again: seconds of CPU
def test_library_is_rebuilt_when_sources_change(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(native, "PACKAGED", tmp_path / "none")
    first = native.library_path("interposer")
    assert first.is_relative_to(tmp_path) and native.library_path("interposer") == first
    monkeypatch.setattr(native, "CFLAGS", (*native.CFLAGS, "-DGPUMOSAIC_TEST_VARIANT"))
    assert native.library_path("interposer") != first


def test_prometheus_endpoint_serves_the_metrics(share_factory) -> None:
    share = share_factory(tq_s=0.05, mode="on", metrics_port=0)
    procs = [share.client("--kernels", "300") for _ in range(2)]
    for p in procs:
        p.communicate(timeout=30)
    host, port = share.daemon.daemon.metrics_address
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain")
        text = resp.read().decode()
    handovers = share.status()["handovers"]
    assert handovers >= 1
    assert f'gpumosaic_share_handovers_total{{gpu="0"}} {handovers}' in text
    assert 'gpumosaic_share_handover_latency_seconds{gpu="0",quantile="0.99"}' in text
    assert "# TYPE gpumosaic_share_handover_latency_seconds summary" in text
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(f"http://{host}:{port}/other", timeout=5)


def test_every_share_command_has_an_example() -> None:
    for command in ("daemon", "run", "ctl", "status", "metrics", "device-plugin"):
        help_text = runner.invoke(app, ["share", command, "--help"], terminal_width=200).stdout
        assert f"Example: gpumosaic share {command}" in help_text, command
