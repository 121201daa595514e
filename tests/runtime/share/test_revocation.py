"""A holder that ignores DROP_LOCK loses the lock TQ + grace after it, and the interposer of
a revoked process blocks its new launches until it holds the lock again."""

from __future__ import annotations

import json
import socket
import threading
import time

from gpumosaic.runtime.share.sockets import socket_path


def test_a_raw_hog_that_ignores_drop_lock_is_revoked(share_factory, raw) -> None:
    tq, grace = 0.3, 0.2
    share = share_factory(tq_s=tq, mode="on", grace_s=grace)
    hog = raw(socket_path(share.daemon.socket_dir, 0))
    assert hog.ask(b"REGISTER pid=1 name=hog\n").startswith(b"SCHED_ON")
    assert hog.ask(b"REQ_LOCK\n") == b"LOCK_OK"
    waiter = share.client("--kernels", "20")
    assert hog.line() == b"DROP_LOCK"  # ... which it ignores
    assert hog.line(5.0) == b"LOCK_REVOKED"
    _, err = waiter.communicate(timeout=30)
    assert waiter.returncode == 0, err
    events = share.daemon.event_list()
    hog_id = next(e["client"] for e in events if e["event"] == "REGISTER" and e["pid"] == 1)
    drop = next(e["t_ns"] for e in events if e["event"] == "DROP_LOCK")
    revoke = next(e for e in events if e["event"] == "LOCK_REVOKED")
    assert revoke["client"] == hog_id
    # Revoked no earlier than TQ + grace after the drop; the waiter granted at that moment.
    assert revoke["t_ns"] - drop >= (tq + grace) * 1e9 - 1e6
    grant = next(e for e in events if e["event"] == "LOCK_OK" and e["pid"] == waiter.pid)
    assert grant["t_ns"] == revoke["t_ns"]
    assert share.status()["revocations"] == 1
    # Its late release changes nothing; asking again queues it like anyone else.
    hog.send(b"LOCK_RELEASED\n")
    assert hog.ask(b"REQ_LOCK\n") == b"LOCK_OK"  # the waiter has gone: next in line
    hog.close()


class FakeDaemon:
    """One connection's worth of daemon, scripted by the test."""

    def __init__(self, path) -> None:
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(1)
        self.server.settimeout(10)
        self.conn: socket.socket | None = None
        self.buf = b""

    def accept(self) -> None:
        self.conn, _ = self.server.accept()
        self.conn.settimeout(5)

    def send(self, line: bytes) -> None:
        assert self.conn is not None
        self.conn.sendall(line + b"\n")

    def expect(self, kind: bytes, timeout_s: float = 5.0) -> int:
        """Read lines until one of type ``kind``; the monotonic time it arrived (ns)."""
        assert self.conn is not None
        deadline = time.monotonic() + timeout_s
        while True:
            while b"\n" in self.buf:
                line, _, self.buf = self.buf.partition(b"\n")
                if line.split(b" ")[0] == kind:
                    return time.monotonic_ns()
            self.conn.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = self.conn.recv(4096)
            assert chunk, f"connection closed while waiting for {kind!r}"
            self.buf += chunk

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.server.close()


def test_interposer_blocks_new_launches_after_lock_revoked(share_factory, tmp_path) -> None:
    share = share_factory(FAKECUDA_KERNEL_US="100")
    path = tmp_path / "fake.sock"
    fake = FakeDaemon(path)
    worker = share.client("--kernels", "20000", extra_env={"GPUMOSAIC_SHARE_SOCKET": str(path)})
    accepted = threading.Thread(target=fake.accept)
    accepted.start()
    accepted.join(10)
    try:
        fake.expect(b"REGISTER")
        fake.send(b"SCHED_ON id=0000000000000001")
        fake.expect(b"REQ_LOCK")
        fake.send(b"LOCK_OK")
        time.sleep(0.3)
        fake.send(b"LOCK_REVOKED")
        asked = fake.expect(b"REQ_LOCK", 5.0)  # it wants to launch more: it asks again
        time.sleep(0.5)
        granted = time.monotonic_ns()
        fake.send(b"LOCK_OK")
        out, err = worker.communicate(timeout=60)
    finally:
        fake.close()
    assert worker.returncode == 0, err
    assert json.loads(out)["rcs"] == [0]
    assert err.count("gpumosaic-share: the daemon took the GPU back") == 1
    launches = [t for t, pid, c in share.calls() if pid == worker.pid and "Launch" in c]
    assert len(launches) == 20000
    before = [t for t in launches if t < asked]
    between = [t for t in launches if asked <= t < granted]
    after = [t for t in launches if t >= granted]
    assert before and after and not between
