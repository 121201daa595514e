"""The change feed behind every ``/ui`` page: a world of sections, sent as differences.

A *world* is ``{section: {key: value}}`` of JSON values (a key per GPU, per job, per
round...). ``Feed.refresh()`` builds the world from its source at most once per
``interval_s`` (however many clients ask), diffs it against the last one and keeps the
patch, encoded once, under a new version. A client that knows version ``v`` gets the
patches after ``v`` (bytes already encoded: the per-client cost is a write), one that
knows none (or fell too far behind) gets the world once. So the source is read once per
interval for all clients, and what travels is what changed.

The wire is Server-Sent Events (``text/event-stream``): ``event: world`` with the whole
world, ``event: patch`` with ``{"v", "set": {section: {key: value}}, "del": {section:
[keys]}}``; each carries ``id: <feed>-<version>`` (the feed's random name: after a
server restart a page's old version names another feed and gets the world again).
Comments (``: keep-alive``) keep proxies from closing an idle stream.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from gpumosaic import cyclic_gc
from gpumosaic.runtime.auth import token_ok

World = dict[str, dict[str, Any]]

KEEP_ALIVE_S = 15.0
# Patches kept for clients that reconnect or fall behind; older ones get the world.
PATCHES_KEPT = 64
# A stream ends after this long and the page reconnects from its version (a cheap patch),
# so no connection outlives a server shutdown by more than this.
STREAM_LIFETIME_S = 15.0


def _encode(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"), allow_nan=False)


def diff(old: World, new: World) -> tuple[dict[str, dict[str, Any]], dict[str, list[str]]]:
    """What changed from ``old`` to ``new``: values set (new or changed) and keys deleted,
    per section."""
    changed: dict[str, dict[str, Any]] = {}
    deleted: dict[str, list[str]] = {}
    for name, section in new.items():
        before = old.get(name, {})
        if section is before:
            continue
        s = {}
        for k, v in section.items():
            was = before.get(k, _MISSING)
            if was is not v and was != v:  # an unchanged value object: no deep compare
                s[k] = v
        if s:
            changed[name] = s
        gone = [k for k in before if k not in section]
        if gone:
            deleted[name] = gone
    for name, before in old.items():
        if name not in new and before:
            deleted[name] = list(before)
    return changed, deleted


_MISSING = object()


def event(kind: str, event_id: str, data: str) -> bytes:
    return f"event: {kind}\nid: {event_id}\ndata: {data}\n\n".encode()


class Feed:
    """One service's change feed (see the module doc). ``source()`` returns the world; it
    is called from whichever thread refreshes, never twice at once."""

    def __init__(self, source: Callable[[], World], interval_s: float = 1.0) -> None:
        self.source = source
        self.interval_s = interval_s
        self.name = secrets.token_hex(4)
        self.version = 0
        self.world: World = {}
        self._world_event = b""  # the world as an event, encoded on demand
        self._patches: deque[tuple[int, bytes]] = deque(maxlen=PATCHES_KEPT)
        self._built_at = -float("inf")
        self._lock = threading.Lock()
        self.refreshes = 0
        self.refresh_cpu_s = 0.0  # CPU time spent building and diffing worlds

    def _id(self) -> str:
        return f"{self.name}-{self.version}"

    def client_version(self, event_id: str) -> int:
        """The version a reconnecting client has, from its last event id (``Last-Event-ID``
        or ``?v=``); 0 (send the world) for another feed's id or anything malformed."""
        name, _, version = event_id.strip().partition("-")
        if name != self.name or not version.isdigit() or len(version) > 15:
            return 0
        return int(version)

    def stale(self, now: float | None = None) -> bool:
        t = time.monotonic() if now is None else now
        return t - self._built_at >= self.interval_s

    def refresh(self) -> int:
        """Rebuild the world if it is older than the interval; returns the version."""
        with self._lock:
            now = time.monotonic()
            if not self.stale(now):
                return self.version
            cpu0 = time.thread_time()
            # A world is thousands of small acyclic values: with the cyclic collector on,
            # building them makes it walk the service's whole heap (numba, numpy, Ray)
            # again and again (most of a refresh's time at 1,000 jobs, measured).
            with cyclic_gc.paused():
                world = self.source()
                changed, deleted = diff(self.world, world)
                self._built_at = now
                if changed or deleted:
                    self.version += 1
                    body = {"v": self.version, "set": changed, "del": deleted}
                    patch = event("patch", self._id(), _encode(body))
                    self._patches.append((self.version, patch))
                    self.world = world
                    self._world_event = b""
            self.refreshes += 1
            self.refresh_cpu_s += time.thread_time() - cpu0
            return self.version

    def since(self, version: int) -> tuple[bytes, int]:
        """The bytes that bring a client at ``version`` up to date (b"" if it is), and the
        version it is at after them."""
        with self._lock:
            if version == self.version:
                return b"", version
            first = self._patches[0][0] if self._patches else self.version + 1
            if 0 < version < self.version and version + 1 >= first:
                return b"".join(p for v, p in self._patches if v > version), self.version
            if not self._world_event:
                self._world_event = event("world", self._id(), _encode(self.world))
            return self._world_event, self.version


def bearer_ok(token: str, authorization: str) -> bool:
    """The API's rule and parser (``auth.token_ok``): no token configured, or
    ``Authorization: Bearer <token>``."""
    return token_ok(token, authorization)


async def stream(
    feed: Feed,
    last_version: int,
    refresh: Callable[[], Awaitable[int]],
    sleep: Callable[[float], Awaitable[None]],
    gone: Callable[[], Awaitable[bool]] | None = None,
    lifetime_s: float = STREAM_LIFETIME_S,
) -> AsyncIterator[bytes]:
    """The event stream of one client: what it misses, then each change, until it goes
    away or ``lifetime_s`` passes (the page reconnects from its version)."""
    version = last_version
    started = quiet_since = time.monotonic()
    yield b"retry: 1000\n\n"
    while time.monotonic() - started < lifetime_s:
        if feed.stale():
            await refresh()
        chunk, version = feed.since(version)
        now = time.monotonic()
        if chunk:
            quiet_since = now
            yield chunk
        elif now - quiet_since >= KEEP_ALIVE_S:
            quiet_since = now
            yield b": keep-alive\n\n"
        if gone is not None and await gone():
            return
        await sleep(min(feed.interval_s, 0.5))
