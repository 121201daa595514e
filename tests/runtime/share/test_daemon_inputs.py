"""The share daemon under bad input and other users: TQ checked on every road, STATUS always
JSON, the socket directory and its files handled safely (issue 23, item 7)."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpumosaic.cli import app
from gpumosaic.runtime.share import limits
from gpumosaic.runtime.share.daemon import ShareDaemon
from gpumosaic.runtime.share.sockets import socket_path
from waiting import wait_for

runner = CliRunner()


def strict_json(text: str) -> dict:
    def refuse(token: str) -> None:
        raise ValueError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def one_line_error(args: list[str], needle: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], result.output


@pytest.mark.parametrize("tq", ["nan", "inf", "-inf", "0", "-1", "0.001", "1e9"])
def test_daemon_flag_tq_is_checked(tq, tmp_path) -> None:
    one_line_error(["share", "daemon", "--socket-dir", str(tmp_path), "--tq", tq], "--tq")
    assert not any(tmp_path.iterdir())  # refused before anything was created


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--grace", "nan"), ("--grace", "-1"), ("--memory-mib", "nan"), ("--memory-mib", "0")],
)
def test_other_daemon_flags_are_checked(flag, value, tmp_path) -> None:
    one_line_error(["share", "daemon", "--socket-dir", str(tmp_path), flag, value], flag)


def test_daemon_flag_ranges_for_gpus_and_port(tmp_path) -> None:
    one_line_error(["share", "daemon", "--socket-dir", str(tmp_path), "--gpus", "5000"], "--gpus")
    one_line_error(
        ["share", "daemon", "--socket-dir", str(tmp_path), "--metrics-port", "70000"],
        "--metrics-port",
    )


def test_ctl_tq_is_checked_and_the_daemon_keeps_its_quantum(served) -> None:
    d = served(tq_s=5.0)
    for bad in ("nan", "inf", "0", "1e9"):
        one_line_error(["share", "ctl", "--socket-dir", str(d.socket_dir), "--tq", bad], "--tq")
    ok = runner.invoke(app, ["share", "ctl", "--socket-dir", str(d.socket_dir), "--tq", "0.25"])
    assert ok.exit_code == 0, ok.output
    assert d.daemon.locks[0].tq_s == 0.25


def test_socket_set_tq_errors_never_change_the_quantum_or_spin(served, raw) -> None:
    d = served(tq_s=5.0)
    path = socket_path(d.socket_dir, 0)
    ctl = raw(path)
    for bad in (b"SET_TQ\n", b"SET_TQ tq=nan\n", b"SET_TQ tq=inf\n", b"SET_TQ tq=-3\n"):
        reply = ctl.ask(bad)
        assert reply.startswith(b"ERROR reason="), (bad, reply)
    assert ctl.ask(b"SET_TQ tq=7.5\n") == b"OK"
    kind, _, body = ctl.ask(b"STATUS\n").decode().partition(" ")
    assert kind == "STATUS" and strict_json(body)["tq_s"] == 7.5
    # A holder and a waiter: the quantum timer must sleep until the quantum ends, not spin.
    holder, waiter = raw(path), raw(path)
    for c in (holder, waiter):
        assert c.ask(b"REGISTER pid=1 name=x\n").startswith(b"SCHED_OFF")  # auto, no memory
    assert ctl.ask(b"SET_MODE anti_thrashing=on\n") == b"OK"
    assert holder.line().startswith(b"SCHED_ON") and waiter.line().startswith(b"SCHED_ON")
    assert holder.ask(b"REQ_LOCK\n") == b"LOCK_OK"
    waiter.send(b"REQ_LOCK\n")
    for bad in (b"SET_TQ\n", b"SET_TQ tq=nan\n"):
        assert ctl.ask(bad).startswith(b"ERROR")
    cpu = time.process_time()
    time.sleep(1.0)
    assert time.process_time() - cpu < 0.3  # the daemon's loop runs in this process
    assert d.daemon.locks[0].holder is not None and len(d.daemon.locks[0].queue) == 1
    for c in (ctl, holder, waiter):
        c.close()


def test_status_is_strict_json_whatever_the_clients_sent(served, raw) -> None:
    d = served(tq_s=1.0)
    path = socket_path(d.socket_dir, 0)
    c = raw(path)
    assert c.ask(b'REGISTER pid=7 name="\\}{\n').startswith(b"SCHED_")
    c.send(b"MEM bytes=1125899906842624 total=1125899906842624\n")
    reply = raw(path).ask(b"STATUS\n").decode()
    status = strict_json(reply.partition(" ")[2])
    assert status["clients"][0]["name"] == '"\\}{'
    assert status["working_set_bytes"] == 2**50 and status["revocations"] == 0
    c.close()


def test_socket_dir_is_created_private_and_group_only_when_asked(served, tmp_path) -> None:
    d = served()
    assert stat.S_IMODE(os.stat(d.socket_dir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(socket_path(d.socket_dir, 0)).st_mode) == 0o600
    g = served(allow_group=True)
    assert stat.S_IMODE(os.stat(g.socket_dir).st_mode) == 0o750
    assert stat.S_IMODE(os.stat(socket_path(g.socket_dir, 0)).st_mode) == 0o660


def test_unsafe_socket_dirs_are_refused(tmp_path) -> None:
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    one_line_error(
        ["share", "daemon", "--socket-dir", str(open_dir)], "writable by group or others"
    )
    group_dir = tmp_path / "group"
    group_dir.mkdir()
    group_dir.chmod(0o770)
    one_line_error(
        ["share", "daemon", "--socket-dir", str(group_dir), "--allow-group"],
        "writable by group or others",
    )
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    one_line_error(["share", "daemon", "--socket-dir", str(link)], "not a directory")
    if os.geteuid() == 0:
        foreign = tmp_path / "foreign"
        foreign.mkdir(mode=0o700)
        os.chown(foreign, 54321, 54321)
    else:
        foreign = Path("/usr")  # root's, and not ours
    one_line_error(["share", "daemon", "--socket-dir", str(foreign)], "belongs to uid")
    # The clients do not trust a directory others may write in either.
    one_line_error(["share", "status", "--socket-dir", str(open_dir)], "not trusting")
    one_line_error(["share", "run", "--socket-dir", str(open_dir), "--", "true"], "not trusting")


def test_only_sockets_are_ever_removed(served, raw, tmp_path) -> None:
    sock_dir = tmp_path / "files"
    sock_dir.mkdir(mode=0o700)
    regular = socket_path(sock_dir, 0)
    regular.write_text("precious")
    one_line_error(["share", "daemon", "--socket-dir", str(sock_dir)], "is not a socket")
    assert regular.read_text() == "precious"
    # A stale socket (its daemon gone) is replaced.
    regular.unlink()
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(regular))
    stale.close()
    d = served(sock_dir)
    assert raw(regular).ask(b"STATUS\n").startswith(b"STATUS ")
    # Someone puts a file where the socket was: stopping leaves it alone.
    regular.unlink()
    regular.write_text("not yours")
    d.stop()
    assert regular.read_text() == "not yours"


def test_a_second_daemon_on_the_same_socket_is_refused(served) -> None:
    d = served()
    one_line_error(["share", "daemon", "--socket-dir", str(d.socket_dir)], "already serves")


def test_connections_are_bounded_and_idle_control_connections_dropped(
    served, raw, monkeypatch
) -> None:
    monkeypatch.setattr(limits, "MAX_CONNECTIONS", 3)
    monkeypatch.setattr(limits, "CONTROL_IDLE_S", 0.3)
    d = served()
    path = socket_path(d.socket_dir, 0)
    clients = [raw(path) for _ in range(3)]
    for c in clients[:2]:
        c.ask(b"REGISTER pid=1 name=a\n")
    assert raw(path).line() == b"ERROR reason=too_many_connections"
    # The third never spoke: it is dropped, and its slot serves a newcomer.
    assert clients[2].line(2.0).startswith(b"ERROR reason=idle")

    def newcomer() -> bytes:
        c = raw(path)
        try:
            return c.ask(b"STATUS\n")
        finally:
            c.close()

    wait_for(
        newcomer, 120, "a newcomer served in the freed slot", until=lambda r: r[:7] == b"STATUS "
    )
    # Registered clients may stay silent for as long as they like: silent for longer than
    # the idle limit (0.3 s), a span of time by its nature.
    time.sleep(0.5)
    assert clients[0].ask(b"STATUS\n").startswith(b"STATUS ")


def test_an_over_long_line_is_an_error_and_the_daemon_goes_on(served, raw) -> None:
    d = served()
    path = socket_path(d.socket_dir, 0)
    c = raw(path)
    c.send(b"STATUS " + b"x" * 100_000 + b"\n")
    assert c.line().startswith(b"ERROR reason=line_too_long")
    assert raw(path).ask(b"STATUS\n").startswith(b"STATUS ")


def test_daemon_constructor_checks_like_the_command_line(tmp_path) -> None:
    for kwargs in ({"tq_s": float("nan")}, {"revoke_grace_s": -1.0}, {"gpus": (-1,)}):
        with pytest.raises(ValueError, match="--"):
            ShareDaemon(tmp_path, **kwargs)  # type: ignore[arg-type]


def test_sigterm_stops_a_daemon_whose_lock_is_busy(tmp_path, raw) -> None:
    # A holder ticking through its quanta must not keep the daemon from exiting.
    sock_dir = tmp_path / "busy"
    cmd = [sys.executable, "-c", "from gpumosaic.cli import main; main()", "share", "daemon"]
    cmd += ["--socket-dir", str(sock_dir), "--tq", "0.05", "--anti-thrashing", "on"]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    try:
        path = socket_path(sock_dir, 0)
        wait_for(path.exists, 60, f"the daemon's socket {path}")
        holder = raw(path)
        holder.ask(b"REGISTER pid=1 name=h\n")
        assert holder.ask(b"REQ_LOCK\n") == b"LOCK_OK"

        # The quantum timer ticks (0.05 s) with no other client: nothing to count from
        # outside, so a span of several quanta.
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0 and not path.exists()


def test_the_metrics_port_survives_garbage(served) -> None:
    d = served(metrics_port=0)
    host, port = d.daemon.metrics_address
    for junk in (
        b"\x00\xff" * 100,
        b"GET " + b"x" * 200_000 + b"\r\n",
        b"GET /metrics\r\n" + b"H: v\r\n" * 500,
    ):
        with socket.create_connection((host, port), timeout=10) as s:
            s.sendall(junk)
            s.shutdown(socket.SHUT_WR)
            while s.recv(65536):
                pass
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\n\r\n")
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 200 OK") and b"gpumosaic_share_revocations_total" in reply
