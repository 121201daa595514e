"""The share daemon: one UNIX socket per GPU, each serving that GPU's lock (asyncio).

It owns the connections and the clock; every decision is ``lock.GpuLock``'s. A client is
the interposer inside a process (it REGISTERs first); a connection that does not register
is a control connection (``share ctl`` / ``share status``). A client whose connection
closes -- it exited, crashed or was killed -- leaves the lock at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import os
import signal
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from gpumosaic.live.share.lock import AntiThrashing, GpuLock, Send
from gpumosaic.live.share.metrics import prometheus_text
from gpumosaic.live.share.native import ShareError
from gpumosaic.live.share.protocol import (
    MAX_LINE,
    MessageType,
    ProtocolError,
    message,
    parse,
)
from gpumosaic.live.ui import share as share_ui

SOCKET_MODE = 0o660


def socket_path(socket_dir: Path, gpu: int) -> Path:
    return socket_dir / f"gpu{gpu}.sock"


def default_socket_dir() -> Path:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "gpumosaic-share"
    return Path(f"/tmp/gpumosaic-share-{os.getuid()}")


def _in_use(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


class ShareDaemon:
    """Serve the GPU locks of ``gpus`` under ``socket_dir`` until ``stop()``."""

    def __init__(
        self,
        socket_dir: Path,
        gpus: Sequence[int] = (0,),
        tq_s: float = 30.0,
        anti_thrashing: AntiThrashing = AntiThrashing.AUTO,
        memory_mib: float | None = None,
        metrics_port: int | None = None,
        event_log: Path | None = None,
    ) -> None:
        if not gpus or len(set(gpus)) != len(gpus):
            raise ShareError(f"--gpus must list distinct GPU indices, got {list(gpus)}")
        memory = None if memory_mib is None else int(memory_mib * 2**20)
        self.socket_dir = Path(socket_dir)
        self.locks = {g: GpuLock(g, tq_s, anti_thrashing, memory) for g in gpus}
        self.metrics_port = metrics_port
        self.event_log_path = event_log
        self._log: TextIO | None = None
        self._writers: dict[int, asyncio.StreamWriter] = {}
        self._ids = itertools.count(1)
        self._wake = {g: asyncio.Event() for g in gpus}
        self._servers: list[asyncio.Server] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._stopped = asyncio.Event()
        self.metrics_address: tuple[str, int] | None = None

    # --- life cycle -------------------------------------------------------------------------

    async def start(self) -> None:
        try:
            self.socket_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ShareError(
                f"cannot create socket dir {self.socket_dir}: {err.strerror}"
            ) from None
        if not os.access(self.socket_dir, os.W_OK | os.X_OK):
            raise ShareError(f"socket dir {self.socket_dir} is not writable")
        if self.event_log_path is not None:
            self._log = self.event_log_path.open("a", buffering=1)
        for gpu in self.locks:
            path = socket_path(self.socket_dir, gpu)
            if path.exists():
                if _in_use(path):
                    raise ShareError(f"a share daemon already serves {path}")
                path.unlink()
            try:
                server = await asyncio.start_unix_server(
                    functools.partial(self._serve, gpu), path=str(path), limit=MAX_LINE
                )
            except OSError as err:
                raise ShareError(f"cannot create socket {path}: {err.strerror}") from None
            os.chmod(path, SOCKET_MODE)
            self._servers.append(server)
            self._tasks.append(asyncio.create_task(self._quantum_timer(gpu)))
        if self.metrics_port is not None:
            try:
                server = await asyncio.start_server(
                    self._serve_metrics, host="127.0.0.1", port=self.metrics_port
                )
            except OSError as err:
                raise ShareError(
                    f"cannot serve metrics on 127.0.0.1:{self.metrics_port}: {err.strerror}"
                ) from None
            self._servers.append(server)
            self.metrics_address = server.sockets[0].getsockname()[:2]

    async def stop(self) -> None:
        self._stopped.set()
        for server in self._servers:
            server.close()
        for writer in list(self._writers.values()):
            writer.close()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for server in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 1.0)
        for gpu in self.locks:
            with contextlib.suppress(FileNotFoundError):
                socket_path(self.socket_dir, gpu).unlink()
        if self._log is not None:
            self._log.close()
            self._log = None

    async def run(self, on_ready: Callable[[], None] | None = None) -> None:
        """Start, call ``on_ready``, serve until SIGINT/SIGTERM, stop."""
        await self.start()
        if on_ready is not None:
            on_ready()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._stopped.set)
        await self._stopped.wait()
        await self.stop()

    # --- connections --------------------------------------------------------------------------

    def _event(self, gpu: int, event: str, client_id: int | None, now: float) -> None:
        """Log one event stamped with ``now``, the time the lock decided at (not the time
        of writing: under load the two differ, and the quanta are measured from ``now``)."""
        if self._log is None:
            return
        lock = self.locks[gpu]
        client = lock.clients.get(client_id) if client_id is not None else None
        record = {
            "t_ns": round(now * 1e9),
            "gpu": gpu,
            "event": event,
            "client": client_id,
            "pid": None if client is None else client.pid,
        }
        self._log.write(json.dumps(record) + "\n")

    def _apply(self, gpu: int, sends: list[Send], now: float) -> None:
        for send in sends:
            writer = self._writers.get(send.client_id)
            self._event(gpu, send.message.type.value, send.client_id, now)
            if writer is not None and not writer.is_closing():
                writer.write(send.message.encode())
        self._wake[gpu].set()

    async def _serve(
        self, gpu: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        lock = self.locks[gpu]
        cid = next(self._ids)
        registered = False
        try:
            while not self._stopped.is_set():
                try:
                    line = await reader.readline()
                except (ValueError, asyncio.LimitOverrunError):
                    writer.write(message(MessageType.ERROR, reason="line_too_long").encode())
                    break
                if not line:
                    break
                now = time.monotonic()
                try:
                    msg = parse(line)
                    kind = msg.type
                    if kind is MessageType.REGISTER and not registered:
                        registered = True
                        self._writers[cid] = writer
                        pid = int(msg.get("pid", "0") or 0)
                        sends = lock.register(cid, pid, msg.get("name", "?") or "?", now)
                        self._event(gpu, "REGISTER", cid, now)
                        self._apply(gpu, sends, now)
                    elif kind is MessageType.REQ_LOCK and registered:
                        self._event(gpu, "REQ_LOCK", cid, now)
                        self._apply(gpu, lock.request(cid, now), now)
                    elif kind is MessageType.LOCK_RELEASED and registered:
                        self._event(gpu, "LOCK_RELEASED", cid, now)
                        self._apply(gpu, lock.released(cid, now), now)
                    elif kind is MessageType.MEM and registered:
                        used, total = (
                            int(msg.get("bytes", "0") or 0),
                            int(msg.get("total", "0") or 0),
                        )
                        self._apply(gpu, lock.memory(cid, used, total, now), now)
                    elif kind is MessageType.SET_TQ:
                        self._apply(gpu, lock.set_tq(float(msg.get("tq", "") or "nan"), now), now)
                        writer.write(message(MessageType.OK).encode())
                    elif kind is MessageType.SET_MODE:
                        mode = AntiThrashing(msg.get("anti_thrashing") or "")
                        self._event(gpu, f"SET_MODE_{mode.value}", None, now)
                        self._apply(gpu, lock.set_mode(mode, now), now)
                        writer.write(message(MessageType.OK).encode())
                    elif kind is MessageType.STATUS:
                        body = json.dumps(lock.status(now).as_dict(), separators=(",", ":"))
                        writer.write(f"STATUS {body}\n".encode())
                    elif kind is MessageType.METRICS:
                        text = self.metrics_text(now)
                        writer.write(f"METRICS lines={text.count(chr(10))}\n{text}".encode())
                    else:
                        raise ProtocolError(f"unexpected {kind.value}")
                except (ProtocolError, ValueError) as err:
                    reason = str(err).replace(" ", "_")[:200] or "bad_message"
                    writer.write(message(MessageType.ERROR, reason=reason).encode())
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            if registered:
                self._writers.pop(cid, None)
                gone = time.monotonic()
                self._event(gpu, "DISCONNECT", cid, gone)
                self._apply(gpu, lock.disconnect(cid, gone), gone)
            writer.close()

    async def _quantum_timer(self, gpu: int) -> None:
        lock, wake = self.locks[gpu], self._wake[gpu]
        while True:
            deadline = lock.next_deadline()
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), timeout)
            wake.clear()
            now = time.monotonic()
            sends = lock.tick(now)
            if sends:
                self._apply(gpu, sends, now)

    # --- metrics ---------------------------------------------------------------------------------

    def metrics_text(self, now: float | None = None) -> str:
        t = time.monotonic() if now is None else now
        locks = list(self.locks.values())
        return prometheus_text(
            [lock.status(t) for lock in locks], [(lk.latency_sum, lk.latency_count) for lk in locks]
        )

    async def _serve_metrics(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), 5.0)
            while (await asyncio.wait_for(reader.readline(), 5.0)) not in (b"\r\n", b"\n", b""):
                pass
            ok = request.split()[:2] == [b"GET", b"/metrics"]
            if not ok and await share_ui.answer(self, request, reader, writer):  # live/ui
                return
            body = self.metrics_text().encode() if ok else b"not found\n"
            status = b"200 OK" if ok else b"404 Not Found"
            writer.write(
                b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain; version=0.0.4\r\n"
                b"Content-Length: "
                + str(len(body)).encode()
                + b"\r\nConnection: close\r\n\r\n"
                + body
            )
            await writer.drain()
        except (TimeoutError, ConnectionError, OSError):
            pass
        finally:
            writer.close()
