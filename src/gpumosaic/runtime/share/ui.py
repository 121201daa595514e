"""``/ui`` of the share daemon, on its metrics port: per GPU the lock holder, the queue of
waiting processes, the registered clients and the hand-overs, as a ``stream.Feed`` world.

Read from the daemon's locks (``GpuLock.status``, the same values ``share status`` and
``/metrics`` show), on the daemon's own event loop, so every status is consistent. The
lock counts hand-overs but keeps no list of them; this view lists the holder changes it
sees at each refresh (``interval_s``; a quantum shorter than that can hide some: the
count is exact).

Sections: ``service`` (GPUs, totals), ``gpus`` (GPU -> quantum, mode, serialized,
holder, waiting, clients, hand-overs, latency quantiles, memory), ``handovers`` (sequence
-> time, GPU, from, to; the last ``HANDOVERS_KEPT``).

The daemon's metrics server is a small asyncio HTTP server (``daemon._serve_metrics``);
``answer`` takes its ``GET /ui`` and ``GET /ui/stream`` requests. It listens on
127.0.0.1 only and has no token, as ``/metrics``.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections import deque
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

import numpy as np

from gpumosaic.runtime.ui.page import page
from gpumosaic.runtime.ui.stream import Feed, World, stream
from gpumosaic.sharing.lock import ClientStatus, GpuStatus

if TYPE_CHECKING:
    from gpumosaic.runtime.share.daemon import ShareDaemon

HANDOVERS_KEPT = 50
REFRESH_S = 0.5


def _client(c: ClientStatus | None) -> dict[str, Any] | None:
    if c is None:
        return None
    return {"id": c.id, "pid": c.pid, "name": c.name, "held_s": round(c.held_s, 1),
            "grants": c.grants, "bytes": c.working_set_bytes}  # fmt: skip


class ShareView:
    def __init__(self, daemon: ShareDaemon) -> None:
        self.daemon = daemon
        self.handovers: deque[tuple[int, dict[str, Any]]] = deque(maxlen=HANDOVERS_KEPT)
        self._holder: dict[int, ClientStatus | None] = {}
        self._seq = 0

    def world(self) -> World:
        now = time.monotonic()
        wall = time.time()
        statuses = [lock.status(now) for lock in self.daemon.locks.values()]
        for s in statuses:
            self._note(s, wall)
        gpus = {str(s.gpu): self._gpu(s) for s in statuses}
        service = {
            "now": round(wall, 1),
            "gpus": len(statuses),
            "clients": sum(len(s.clients) for s in statuses),
            "waiting": sum(len(s.waiting) for s in statuses),
            "handovers": sum(s.handovers for s in statuses),
        }
        return {
            "service": {"s": service},
            "gpus": gpus,
            "handovers": {str(k): e for k, e in self.handovers},
        }

    @staticmethod
    def _gpu(s: GpuStatus) -> dict[str, Any]:
        lat = np.asarray(s.handover_latencies_s)
        q = np.quantile(lat, [0.5, 0.99]).tolist() if len(lat) else [None, None]
        return {
            "tq_s": s.tq_s,
            "mode": s.anti_thrashing.value,
            "serialized": s.serialized,
            "holder": _client(s.holder),
            "waiting": [_client(c) for c in s.waiting],
            "clients": [_client(c) for c in s.clients],
            "handovers": s.handovers,
            "latency_p50_s": None if q[0] is None else round(q[0], 4),
            "latency_p99_s": None if q[1] is None else round(q[1], 4),
            "memory_bytes": s.memory_bytes,
            "working_set_bytes": s.working_set_bytes,
        }

    def _note(self, s: GpuStatus, wall: float) -> None:
        """A hand-over: the holder differs from the last client seen holding the GPU (a
        grant to a GPU nobody held before is not one, as for the lock's own count)."""
        if s.holder is None:
            return
        before = self._holder.get(s.gpu)
        self._holder[s.gpu] = s.holder
        if before is None or before.id == s.holder.id:
            return
        self._seq += 1
        entry = {
            "t": round(wall, 2),
            "gpu": s.gpu,
            "from": f"{before.name} (pid {before.pid})",
            "to": f"{s.holder.name} (pid {s.holder.pid})",
        }
        self.handovers.append((self._seq, entry))


_feeds: weakref.WeakKeyDictionary[ShareDaemon, Feed] = weakref.WeakKeyDictionary()


def feed_of(daemon: ShareDaemon) -> Feed:
    feed = _feeds.get(daemon)
    if feed is None:
        feed = _feeds[daemon] = Feed(ShareView(daemon).world, REFRESH_S)
    return feed


async def answer(
    daemon: ShareDaemon,
    request_line: bytes,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
) -> bool:
    """Answer ``GET /ui`` or ``GET /ui/stream`` on the daemon's metrics server; False for
    any other request (the server answers it)."""
    parts = request_line.split()
    if len(parts) < 2 or parts[0] != b"GET":
        return False
    path, _, query = parts[1].decode("latin-1").partition("?")
    if path == "/ui":
        body = page("share", "gpumosaic share")
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
            b"Cache-Control: no-store\r\nContent-Length: " + str(len(body)).encode()
            + b"\r\nConnection: close\r\n\r\n" + body
        )  # fmt: skip
        await writer.drain()
        return True
    if path != "/ui/stream":
        return False
    feed = feed_of(daemon)
    version = feed.client_version((parse_qs(query).get("v") or [""])[0])
    writer.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n"
        b"Connection: close\r\n\r\n"
    )

    async def refresh() -> int:
        return feed.refresh()  # on the daemon's loop: the locks' state is consistent

    async def gone() -> bool:  # the page closed its side (it sends nothing after the request)
        return reader.at_eof() or writer.is_closing()

    async for chunk in stream(feed, version, refresh, asyncio.sleep, gone):
        writer.write(chunk)
        await writer.drain()
    return True
