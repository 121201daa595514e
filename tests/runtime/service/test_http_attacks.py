"""Memory and connections under attack (issue 35, classes 2 and 6): the token is checked
before a body is read; body bytes are bounded per request and in total; a refused body
is answered so that Python's urllib reads the answer; half-open connections are closed;
one Authorization parser for every route."""

from __future__ import annotations

import asyncio
import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from builders import cluster

from gpumosaic.run.serve import ServeDescription, Service
from gpumosaic.runtime.api.http_guard import GuardLimits, HttpGuard, Message
from gpumosaic.runtime.auth import bearer
from gpumosaic.runtime.executors.contract import InProcessExecutor

TOKEN = "s3cret"


@pytest.fixture
def guarded_service(tmp_path: Path) -> Iterator[Service]:
    """A round service with a token (in-process executor), its idle timeout short."""
    config = ServeDescription(state=str(tmp_path / "state.db"), port=0, round_s=60.0, token=TOKEN)
    svc = Service(
        config,
        cluster("v100:2"),
        executor_factory=lambda table: InProcessExecutor(table, time.time, lambda j, m: 50.0),
    )
    svc.guard_limits = GuardLimits(idle_s=0.5)
    svc.start()
    yield svc
    svc.stop()


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def _first_line(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data.split(b"\r\n", 1)[0]


def test_an_unauthenticated_body_is_refused_before_it_is_read(guarded_service) -> None:  # type: ignore[no-untyped-def]
    """A client that waits for ``100 Continue`` before sending its 16 MiB: the server
    answers 401 from the headers alone (it never asks for the body)."""
    with socket.create_connection(_address(guarded_service.url), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/jobs/batch HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 16000000\r\nExpect: 100-continue\r\n\r\n"
        )
        assert _first_line(sock) == b"HTTP/1.1 401 Unauthorized"
    # A lease route with a job's own token gets as far as its body (then 410: no lease).
    status = _post(guarded_service.url, "/v1/leases/7-0-ab/checkpoint", b'{"steps": 1}', "x")
    assert status == 401


def _post(url: str, path: str, body: bytes, token: str | None = TOKEN) -> int:
    request = urllib.request.Request(url + path, data=body, method="POST")
    request.add_header("Content-Type", "application/json")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return int(r.status)
    except urllib.error.HTTPError as err:
        return err.code


def test_urllib_reads_the_413_of_a_20_mb_body(guarded_service) -> None:  # type: ignore[no-untyped-def]
    body = json.dumps({"jobs": [{"command": "x" * 20_000_000, "steps": 1}]}).encode()
    assert _post(guarded_service.url, "/v1/jobs/batch", body) == 413  # not a reset
    assert _post(guarded_service.url, "/v1/jobs/batch", body, token=None) == 401


def test_a_half_open_connection_is_closed(guarded_service) -> None:  # type: ignore[no-untyped-def]
    """Headers begun and never finished, or a body promised and never sent: closed after
    the idle timeout (0.5 s here) instead of held until the descriptors run out."""
    for opening in (
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n",
        b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret\r\n"
        b"Content-Length: 100\r\n\r\n{",
        b"",
    ):
        with socket.create_connection(_address(guarded_service.url), timeout=10) as sock:
            sock.sendall(opening)
            try:
                data = sock.recv(4096)  # b"" once the server closes; a timeout if never
            except TimeoutError:
                pytest.fail(f"the server held a half-open connection ({opening!r}) for 10 s")
            assert data == b"" or data.startswith(b"HTTP/1.1 4"), (opening, data)


@pytest.mark.parametrize(
    "header",
    ["Bearer s3cret", "bearer s3cret", "BEARER  s3cret", "Bearer\ts3cret ", " Bearer s3cret"],
)
def test_one_authorization_parser_for_every_route(guarded_service, header: str) -> None:  # type: ignore[no-untyped-def]
    assert bearer(header) == b"s3cret"
    for path in ("/v1/jobs", "/metrics", "/ui/stream"):
        request = urllib.request.Request(guarded_service.url + path)
        request.add_header("Authorization", header)
        with urllib.request.urlopen(request, timeout=10) as r:
            assert r.status == 200, (path, header)


@pytest.mark.parametrize(
    "header", ["", "Bearer", "Basic s3cret", "Bearer wrong", "Bearer s3cret x"]
)
def test_anything_else_is_not_the_token(header: str) -> None:
    assert bearer(header) != b"s3cret"


# ---- the guard itself, in-process ----------------------------------------------------


class Recorder:
    """An ASGI app that reads its whole body and answers 200 (after ``hold`` is set)."""

    def __init__(self) -> None:
        self.called = 0
        self.hold = asyncio.Event()
        self.hold.set()

    async def __call__(self, scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        self.called += 1
        while True:
            message = await receive()
            if not message.get("more_body"):
                break
        await self.hold.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def _scope(headers: list[tuple[bytes, bytes]] | None = None) -> dict[str, object]:
    return {"type": "http", "method": "POST", "path": "/x", "headers": headers or []}


def _body(chunks: list[bytes]):  # type: ignore[no-untyped-def]
    messages = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
        for i, c in enumerate(chunks)
    ]

    async def receive() -> Message:
        if messages:
            return messages.pop(0)
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    return receive, messages


async def _run(guard: HttpGuard, scope, receive) -> list[Message]:  # type: ignore[no-untyped-def]
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    await guard(scope, receive, send)
    return sent


def test_the_guard_never_lets_an_unauthorized_request_reach_the_app() -> None:
    app = Recorder()
    guard = HttpGuard(app, lambda path: 1000, authorized=lambda scope: False)
    receive, left = _body([b"a" * 500, b"b" * 500])
    sent = asyncio.run(_run(guard, _scope(), receive))
    assert app.called == 0 and sent[0]["status"] == 401
    assert left == []  # its body was read and dropped (so the client reads the 401)
    assert guard.stats.refused_unauthenticated == 1 and guard.stats.in_flight_bytes == 0


def test_bytes_in_flight_are_bounded_for_the_whole_service() -> None:
    """Two requests of 600 bytes under a 1,000-byte budget: the first holds its bytes
    until answered, the second is refused 503 instead of doubling what is held."""
    app = Recorder()
    guard = HttpGuard(app, lambda path: 1000, limits=GuardLimits(in_flight_bytes=1000))

    async def both() -> tuple[list[Message], list[Message]]:
        app.hold.clear()
        first = asyncio.create_task(_run(guard, _scope(), _body([b"a" * 600])[0]))
        while guard.stats.in_flight_bytes < 600:
            await asyncio.sleep(0)
        second = await _run(guard, _scope(), _body([b"b" * 300, b"b" * 300])[0])
        app.hold.set()
        return await first, second

    first, second = asyncio.run(both())
    assert first[0]["status"] == 200 and second[0]["status"] == 503
    assert guard.stats.in_flight_bytes == 0 and guard.stats.refused_busy == 1


def test_a_chunked_body_is_counted_as_it_arrives() -> None:
    app = Recorder()
    guard = HttpGuard(app, lambda path: 1000)
    sent = asyncio.run(_run(guard, _scope(), _body([b"a" * 600, b"a" * 600, b"a"])[0]))
    assert sent[0]["status"] == 413 and guard.stats.in_flight_bytes == 0
