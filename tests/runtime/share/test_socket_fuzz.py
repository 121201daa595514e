"""Socket fuzzer: whatever bytes arrive, the share daemon never dies or hangs, and every line
it writes back is a well-formed message (errors included); STATUS stays strict JSON with a
consistent lock (issue 23, items 1 and 9). Bounded: ~200 examples on a unix socket in a
temporary directory, well under a minute."""

from __future__ import annotations

import json
import socket
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpumosaic.runtime.share.protocol import MessageType, ProtocolError, parse
from gpumosaic.runtime.share.sockets import socket_path

REPLIES = {
    MessageType.OK,
    MessageType.ERROR,
    MessageType.STATUS,
    MessageType.METRICS,
    MessageType.SCHED_ON,
    MessageType.SCHED_OFF,
    MessageType.LOCK_OK,
    MessageType.DROP_LOCK,
    MessageType.LOCK_REVOKED,
}
VALUES = [
    "0", "1", "5", "0.05", "30", "-1", "nan", "NaN", "inf", "-inf", "1e309", "1e-320", "0x10",
    "1_000", "99999999999999999999999999", str(2**63), "١٢", "auto", "on", "off", "", "=",
    "a=b", "\x00", "é", "x" * 70,
]  # fmt: skip
KEYS = ["pid", "name", "bytes", "total", "tq", "anti_thrashing", "id", "reason", "x", ""]


def _line(kind: str, fields: list[tuple[str, str]]) -> bytes:
    text = " ".join([kind, *(f"{k}={v}" for k, v in fields)])
    return text.encode("utf-8", "surrogateescape") + b"\n"


messages = st.builds(
    _line,
    st.sampled_from([m.value for m in MessageType] + ["", "register", "STATUSX", "\x7f"]),
    st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(VALUES)), max_size=4),
)
chunks = st.one_of(
    messages,
    messages,  # weighted towards lines that look like the protocol
    st.binary(max_size=64),
    st.builds(lambda n, b: b * n, st.integers(300, 5000), st.sampled_from([b"x", b"\n", b"="])),
)


class Peer:
    def __init__(self, path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(5)
        self.sock.connect(str(path))
        self.buf = b""
        self.closed = False

    def send(self, data: bytes) -> None:
        if self.closed:
            return
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            self.closed = True

    def lines_until_status(self) -> list[bytes]:
        """Every line until a STATUS reply (or the daemon closing us); a hang fails."""
        out: list[bytes] = []
        deadline = time.monotonic() + 5
        pending_metrics = 0
        while True:
            while b"\n" in self.buf:
                line, _, self.buf = self.buf.partition(b"\n")
                if pending_metrics:
                    pending_metrics -= 1
                    continue
                out.append(line)
                if line.startswith(b"METRICS lines="):
                    pending_metrics = int(line.split(b"=")[1])
                if line.startswith(b"STATUS "):
                    return out
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"the daemon did not answer STATUS: {out[-3:]}"
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                return out
            self.buf += chunk

    def close(self) -> None:
        self.sock.close()


def check_reply(line: bytes) -> None:
    assert line.isascii() and b"\r" not in line and len(line) < 1_000_000
    if line.startswith(b"STATUS "):  # the one reply that is not key=value: STATUS <json>
        check_status(line.partition(b" ")[2])
        return
    try:
        msg = parse(line)
    except ProtocolError as err:  # pragma: no cover - the failure being looked for
        raise AssertionError(f"malformed line from the daemon: {line[:120]!r}") from err
    assert msg.type in REPLIES, line[:120]
    if msg.type is MessageType.ERROR:
        assert msg.get("reason"), line
    assert msg.type is not MessageType.STATUS, line


def check_status(body: bytes) -> dict:
    def refuse(token: str) -> None:
        raise AssertionError(f"STATUS is not strict JSON: {token}")

    status = json.loads(body, parse_constant=refuse)
    ids = {c["id"] for c in status["clients"]}
    waiting = [w["id"] for w in status["waiting"]]
    assert len(set(waiting)) == len(waiting) and set(waiting) <= ids
    if status["holder"] is not None:
        assert status["holder"]["id"] in ids and status["holder"]["id"] not in waiting
        assert status["serialized"]
    assert 0.01 <= status["tq_s"] <= 86_400
    return status


@pytest.mark.slow
def test_the_daemon_survives_any_bytes(served) -> None:
    d = served(tq_s=0.05, anti_thrashing="on", revoke_grace_s=0.05)
    path = socket_path(d.socket_dir, 0)
    keep = Peer(path)  # a well-behaved client that stays through every example
    keep.send(b"REGISTER pid=1 name=keeper\n")

    @settings(
        max_examples=200,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(
        streams=st.lists(st.lists(chunks, max_size=6), min_size=1, max_size=3),
        hang_up=st.booleans(),
    )
    def one_example(streams, hang_up) -> None:
        peers = [Peer(path) for _ in streams]
        for peer, stream in zip(peers, streams, strict=True):
            for chunk in stream:
                peer.send(chunk)
        if hang_up:  # leave mid-conversation, maybe mid-line, maybe holding the lock
            peers[0].close()
            peers = peers[1:]
        for peer in peers:
            peer.send(b"\nSTATUS\n")
            for line in peer.lines_until_status():
                check_reply(line)
            peer.close()
        fresh = Peer(path)
        fresh.send(b"STATUS\n")
        lines = fresh.lines_until_status()
        assert lines and lines[-1].startswith(b"STATUS "), lines
        check_status(lines[-1].partition(b" ")[2])
        fresh.close()

    one_example()
    assert d.thread is not None and d.thread.is_alive()
    keep.send(b"STATUS\n")
    lines = keep.lines_until_status()
    for line in lines:
        check_reply(line)
    status = check_status(lines[-1].partition(b" ")[2])
    assert [c["name"] for c in status["clients"]] == ["keeper"]  # every fuzz client left
    keep.close()
