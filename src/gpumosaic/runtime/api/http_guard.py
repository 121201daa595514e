"""What an HTTP service of ours holds for its clients, bounded: one module for ``serve``'s
API and the Kubernetes extender (docs/live.md, "Limits under load").

``HttpGuard`` (pure ASGI middleware, no buffering of its own) decides about a request
from its headers before a byte of its body is read:

- the token (``authorized``: a request that needs one and lacks it is a 401 before its
  body is read, so an unauthenticated client makes the service hold nothing);
- the body's size: a ``Content-Length`` over the route's limit is a 413 at once; a body
  sent without one (chunked) is counted as it arrives and refused at the first chunk past
  the limit;
- the bytes in flight: every request's body bytes received and not yet released (its
  response is done) count against one budget for the whole service; a chunk that would
  pass it is a 503 ("busy"), so N connections cannot hold N times the largest body.

A refused request's body is read and thrown away (one of at most ``drain_bytes``, within
``drain_s``) before the answer is sent, so a client that sends its whole body before
reading (Python's urllib) reads the 4xx instead of a connection reset. Held memory stays
bounded by the server's flow control (it pauses reading at 64 KiB per connection).

``guarded_config`` makes the uvicorn ``Config`` with the connection limits: at most
``max_connections`` at once (beyond: 503), idle keep-alive connections closed after
``keep_alive_s``, and a connection that keeps the server waiting for its headers or body
(half-open, or a slow sender) closed after ``idle_s`` without a byte.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class GuardLimits:
    """The bounds of one service (defaults: ``serve``'s; the extender passes its own)."""

    in_flight_bytes: int = 32 << 20  # all requests' bodies together (2 batch bodies)
    max_connections: int = 1_000
    keep_alive_s: float = 5.0
    idle_s: float = 20.0  # waiting for a client's bytes (headers or body)
    # A refused body up to this size is read and dropped before the answer (a larger one
    # cannot be waited for: it is answered at once, and such a client may see a reset).
    drain_bytes: int = 32 << 20
    drain_s: float = 10.0
    drain_gap_s: float = 2.0  # ... as long as the client keeps sending (a stalled one: not)


@dataclass(slots=True)
class GuardStats:
    """What the guard holds and refused (``/metrics``); owned by one ``HttpGuard``."""

    in_flight_bytes: int = 0  # bodies received, their requests not yet answered
    refused_unauthenticated: int = 0
    refused_too_large: int = 0
    refused_busy: int = 0

    def count(self, status: int) -> None:
        if status == 401:
            self.refused_unauthenticated += 1
        elif status == 413:
            self.refused_too_large += 1
        else:
            self.refused_busy += 1


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _json_detail(status: int, message: str) -> bytes:
    return json.dumps({"detail": message}).encode()


class HttpGuard:
    def __init__(
        self,
        app: App,
        limit_of: Callable[[str], int],
        authorized: Callable[[Scope], bool] | None = None,
        limits: GuardLimits | None = None,
        body_of: Callable[[int, str], bytes] = _json_detail,
        stats: GuardStats | None = None,
    ) -> None:
        """``limit_of``: path -> body bytes allowed; ``authorized``: whether the headers
        may open the route (None: the app decides alone); ``body_of``: the refusal's JSON
        in the service's own shape."""
        self.app = app
        self.limit_of = limit_of
        self.authorized = authorized
        self.limits = limits or GuardLimits()
        self.body_of = body_of
        self.stats = stats if stats is not None else GuardStats()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.authorized is not None and not self.authorized(scope):
            await self._refuse(scope, receive, send, 401, "missing or wrong token "
                               "(Authorization: Bearer <token>)")  # fmt: skip
            return
        limit = self.limit_of(scope.get("path", ""))
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await self._refuse(scope, receive, send, 413, f"request body larger than {limit} bytes")
            return
        seen = 0
        refusal: Refused | None = None
        started = False
        body_done = False

        async def counted() -> Message:
            nonlocal seen, refusal, body_done
            message = await receive()
            if message["type"] == "http.request":
                body_done = not message.get("more_body", False)
                n = len(message.get("body", b""))
                if seen + n > limit:
                    refusal = Refused(413, f"request body larger than {limit} bytes")
                elif self.stats.in_flight_bytes + n > self.limits.in_flight_bytes:
                    refusal = Refused(503, "busy: too many request bytes in flight; retry")
                if refusal is not None:
                    raise refusal
                seen += n
                self.stats.in_flight_bytes += n
            return message

        async def guarded(message: Message) -> None:
            nonlocal started
            if refusal is not None:  # the app's own answer to the aborted read is replaced
                return
            started = True
            await send(message)

        try:
            with contextlib.suppress(Refused):
                await self.app(scope, counted, guarded)
        finally:
            self.stats.in_flight_bytes -= seen
        if refusal is not None and not started:
            await self._refuse(
                scope, receive, send, refusal.status, refusal.message, drain=not body_done
            )

    async def _refuse(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        status: int,
        message: str,
        drain: bool = True,
    ) -> None:
        self.stats.count(status)
        declared = _content_length(scope)
        small = declared is None or declared <= self.limits.drain_bytes
        if drain and small and not _expects_continue(scope):  # a 100-waiter sends nothing
            await self._drain(receive)
        body = self.body_of(status, message)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        if status == 401:
            headers.append((b"www-authenticate", b"Bearer"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _drain(self, receive: Receive) -> None:
        """Read and drop what is left of the body, bounded in bytes and time."""
        left = self.limits.drain_bytes
        give_up = time.monotonic() + self.limits.drain_s
        while left > 0:
            wait = min(give_up - time.monotonic(), self.limits.drain_gap_s)
            if wait <= 0:
                return
            try:
                message = await asyncio.wait_for(receive(), wait)
            except (TimeoutError, Refused):
                return
            if message["type"] != "http.request":
                return
            left -= len(message.get("body", b""))
            if not message.get("more_body", False):
                return


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _expects_continue(scope: Scope) -> bool:
    return any(
        name == b"expect" and value.lower() == b"100-continue"
        for name, value in scope.get("headers", ())
    )


def header(scope: Scope, name: bytes) -> bytes | None:
    """The first value of header ``name`` (lower case), or None."""
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value)
    return None


def guarded_options(limits: GuardLimits) -> dict[str, Any]:
    """uvicorn's settings (``Config`` or ``uvicorn.run``) for the connection limits."""
    return {
        "limit_concurrency": limits.max_connections,
        "timeout_keep_alive": max(1, round(limits.keep_alive_s)),
        "http": idle_closing_protocol(limits.idle_s),
    }


def guarded_config(app: Any, limits: GuardLimits, **options: Any) -> Any:
    """A ``uvicorn.Config`` for ``app`` with the connection limits of ``limits``."""
    import uvicorn

    return uvicorn.Config(app, **guarded_options(limits), **options)


def idle_closing_protocol(idle_s: float) -> type:
    """uvicorn's HTTP protocol (httptools or h11, as ``auto`` picks) with one more
    timer: while the server waits for the client's bytes (the next request's headers, or
    the rest of a body) and none comes for ``idle_s``, the connection is closed. A
    request the app is working on (a long poll, a stream) is never cut."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    class IdleClosing(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        _idle: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            self._arm()
            super().data_received(data)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._idle is not None:
                self._idle.cancel()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self._idle is not None:
                self._idle.cancel()
            self._idle = self.loop.call_later(idle_s, self._on_idle)

        def _on_idle(self) -> None:
            cycle = self.cycle
            waiting_for_client = cycle is None or cycle.response_complete or cycle.more_body
            if waiting_for_client and not self.transport.is_closing():
                self.transport.close()
            else:
                self._arm()

    return IdleClosing
