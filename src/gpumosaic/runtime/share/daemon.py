"""The share daemon: one UNIX socket per GPU, each serving that GPU's lock (asyncio).

It owns the connections and the wall clock; every decision is ``sharing.lock.GpuLock``'s,
the same object the nvshare model drives with simulated time. A client is the interposer
inside a process (it REGISTERs first); a connection that does not register is a control
connection (``share ctl`` / ``share status``). A client whose connection closes -- it
exited, crashed or was killed -- leaves the lock at once; a holder that does not release
``TQ + grace`` after DROP_LOCK has its lock revoked.

The core (``on_line``, ``on_tick``, ``on_disconnect``) is synchronous and takes the time
of each event, so tests can drive it without sockets; ``_serve`` and ``_quantum_timer``
only move bytes and read the clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import math
import signal
import socket
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO, TypeVar

from gpumosaic.runtime.share import limits
from gpumosaic.runtime.share import ui as share_ui
from gpumosaic.runtime.share.fair import FairGpuLock
from gpumosaic.runtime.share.metrics import prometheus_text
from gpumosaic.runtime.share.native import ShareError
from gpumosaic.runtime.share.protocol import (
    LockReleased,
    Memory,
    Message,
    MessageType,
    MetricsQuery,
    ProtocolError,
    Register,
    RequestLock,
    SetMode,
    SetTq,
    StatusQuery,
    decision_message,
    error,
    parse_request,
)
from gpumosaic.runtime.share.sockets import (
    claim_socket,
    clear_stale_socket,
    lock_socket,
    prepare_socket_dir,
    remove_own_socket,
    socket_path,
)
from gpumosaic.runtime.state.fencing import HeldFile
from gpumosaic.sharing.lock import DEFAULT_TQ_S, AntiThrashing, Decision, Grant

_T = TypeVar("_T", int, float)


def _checked(flag: str, check: Callable[[_T], _T], value: _T) -> _T:
    try:
        return check(value)
    except ValueError as err:
        raise ShareError(f"{flag}: {err}") from None


@dataclass(frozen=True, slots=True)
class Send:
    """Send ``message`` to registered client ``client_id``."""

    client_id: int
    message: Message


@dataclass(slots=True)
class Connection:
    """One accepted connection on one GPU's socket; a client once it has registered."""

    id: int
    gpu: int
    registered: bool = False
    owner: tuple[int, int] = (-1, -1)  # the peer's (uid, pid) from the socket


def _peer(writer: asyncio.StreamWriter) -> tuple[int, int]:
    """The (pid, uid) of a UNIX socket's peer (SO_PEERCRED); (-1, -1) if unknown."""
    sock = writer.get_extra_info("socket")
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return -1, -1
    pid, uid, _ = struct.unpack("3i", creds)
    return pid, uid


class ShareDaemon:
    """Serve the GPU locks of ``gpus`` under ``socket_dir`` until ``stop()``.

    Every argument is checked against ``limits`` here (a ``ShareError`` naming the flag),
    so the command line and any other caller get the same rules.
    """

    def __init__(
        self,
        socket_dir: Path,
        gpus: Sequence[int] = (0,),
        tq_s: float = DEFAULT_TQ_S,
        anti_thrashing: AntiThrashing = AntiThrashing.AUTO,
        memory_mib: float | None = None,
        metrics_port: int | None = None,
        event_log: Path | None = None,
        revoke_grace_s: float = limits.DEFAULT_REVOKE_GRACE_S,
        allow_group: bool = False,
    ) -> None:
        if not gpus or len(set(gpus)) != len(gpus):
            raise ShareError(f"--gpus must list distinct GPU indices, got {list(gpus)}")
        for gpu in gpus:
            _checked("--gpus", limits.gpu_index, gpu)
        tq_s = _checked("--tq", limits.tq_seconds, tq_s)
        revoke_grace_s = _checked("--grace", limits.grace_seconds, revoke_grace_s)
        memory = None
        if memory_mib is not None:
            memory = round(_checked("--memory-mib", limits.memory_mib, memory_mib) * 2**20)
        if metrics_port is not None:
            _checked("--metrics-port", limits.port, metrics_port)
        self.socket_dir = Path(socket_dir)
        self.allow_group = allow_group
        self.locks = {
            g: FairGpuLock(g, tq_s, AntiThrashing(anti_thrashing), memory, revoke_grace_s)
            for g in gpus
        }
        self.metrics_port = metrics_port
        self.event_log_path = event_log
        self._log: TextIO | None = None
        self._writers: dict[int, asyncio.StreamWriter] = {}
        self._open = 0
        self._by_pid: dict[int, int] = {}  # open connections per peer process and user
        self._by_uid: dict[int, int] = {}
        self._ids = itertools.count(1)
        self._wake = {g: asyncio.Event() for g in gpus}
        self._servers: list[asyncio.Server] = []
        self._sockets: dict[Path, tuple[int, int]] = {}  # ours: path -> (st_dev, st_ino)
        self._held: list[HeldFile] = []  # the one-writer locks of our sockets
        self._tasks: list[asyncio.Task[None]] = []
        self._stopped = asyncio.Event()
        self.metrics_address: tuple[str, int] | None = None

    # --- the core: one event in, the messages to send out ----------------------------------

    def connect(self, gpu: int, owner: tuple[int, int] = (-1, -1)) -> Connection:
        """A new connection on ``gpu``'s socket from ``owner`` (its peer's uid and pid)."""
        return Connection(next(self._ids), gpu, owner=owner)

    def on_line(self, conn: Connection, line: bytes, now: float) -> tuple[list[Send], bytes]:
        """Handle one line from ``conn``: (messages to registered clients, the reply to
        ``conn``; empty when the request has none)."""
        lock = self.locks[conn.gpu]
        try:
            request = parse_request(line)
        except ProtocolError as err:
            return [], error(err.reason, err.detail).encode()
        decisions: list[Decision] = []
        reply = b""
        if isinstance(request, Register):
            if conn.registered:
                return [], error("already_registered").encode()
            conn.registered = True
            decisions = lock.register(conn.id, request.pid, request.name, now)
            lock.own(conn.id, conn.owner)  # its turns are its peer's (``fair``)
            self._event(conn.gpu, "REGISTER", conn.id, now)
        elif isinstance(request, RequestLock | LockReleased | Memory):
            if not conn.registered:
                return [], error("not_registered", "send REGISTER first").encode()
            if isinstance(request, RequestLock):
                self._event(conn.gpu, "REQ_LOCK", conn.id, now)
                decisions = lock.request(conn.id, now)
            elif isinstance(request, LockReleased):
                self._event(conn.gpu, "LOCK_RELEASED", conn.id, now)
                decisions = lock.released(conn.id, now)
            else:
                decisions = lock.memory(conn.id, request.used_bytes, request.total_bytes, now)
        elif isinstance(request, SetTq):
            self._event(conn.gpu, "SET_TQ", None, now)
            decisions = lock.set_tq(request.tq_s, now)
            reply = Message(MessageType.OK).encode()
        elif isinstance(request, SetMode):
            self._event(conn.gpu, f"SET_MODE_{request.mode.value}", None, now)
            decisions = lock.set_mode(request.mode, now)
            reply = Message(MessageType.OK).encode()
        elif isinstance(request, StatusQuery):
            body = json.dumps(lock.status(now).as_dict(), separators=(",", ":"), allow_nan=False)
            reply = f"STATUS {body}\n".encode()
        elif isinstance(request, MetricsQuery):
            text = self.metrics_text(now)
            reply = f"METRICS lines={text.count(chr(10))}\n{text}".encode()
        return self._sends(conn.gpu, decisions, now), reply

    def on_tick(self, gpu: int, now: float) -> list[Send]:
        return self._sends(gpu, self.locks[gpu].tick(now), now)

    def on_disconnect(self, conn: Connection, now: float) -> list[Send]:
        if not conn.registered:
            return []
        conn.registered = False
        self._event(conn.gpu, "DISCONNECT", conn.id, now)
        return self._sends(conn.gpu, self.locks[conn.gpu].disconnect(conn.id, now), now)

    def _sends(self, gpu: int, decisions: list[Decision], now: float) -> list[Send]:
        out = []
        for decision in decisions:
            msg = decision_message(decision)
            handover = decision.handover if isinstance(decision, Grant) else None
            self._event(gpu, msg.type.value, decision.client_id, now, handover)
            out.append(Send(decision.client_id, msg))
        return out

    def _event(
        self,
        gpu: int,
        event: str,
        client_id: int | None,
        now: float,
        handover: bool | None = None,
    ) -> None:
        """Log one event stamped with ``now``, the time the lock decided at (not the time
        of writing: under load the two differ, and the quanta are measured from ``now``).
        A grant says whether it was a hand-over and every event names its client, so the
        service's share supervisor counts each job's hand-overs (``live/rounds/sharing``)."""
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
            "name": None if client is None else client.name,
        }
        if handover is not None:
            record["handover"] = handover
        self._log.write(json.dumps(record) + "\n")

    # --- life cycle -------------------------------------------------------------------------

    async def start(self) -> None:
        prepare_socket_dir(self.socket_dir, self.allow_group)
        if self.event_log_path is not None:
            try:
                self._log = self.event_log_path.open("a", buffering=1)
            except OSError as err:
                raise ShareError(
                    f"--event-log: cannot write {self.event_log_path}: {err.strerror or err}"
                ) from None
        for gpu in self.locks:
            path = socket_path(self.socket_dir, gpu)
            self._held.append(lock_socket(path))
            try:
                clear_stale_socket(path)
                server = await asyncio.start_unix_server(
                    functools.partial(self._serve, gpu), path=str(path), limit=limits.MAX_LINE
                )
            except OSError as err:
                self._release_locks()
                raise ShareError(f"cannot create socket {path}: {err.strerror or err}") from None
            except ShareError:
                self._release_locks()  # a refused start holds nothing
                raise
            self._sockets[path] = claim_socket(path, self.allow_group)
            self._servers.append(server)
            self._tasks.append(asyncio.create_task(self._quantum_timer(gpu)))
        if self.metrics_port is not None:
            try:
                server = await asyncio.start_server(
                    self._serve_metrics, host="127.0.0.1", port=self.metrics_port
                )
            except OSError as err:
                raise ShareError(
                    f"cannot serve metrics on 127.0.0.1:{self.metrics_port}: {err.strerror or err}"
                ) from None
            self._servers.append(server)
            self.metrics_address = server.sockets[0].getsockname()[:2]

    async def stop(self) -> None:
        self._stopped.set()
        for wake in self._wake.values():
            wake.set()  # the timers see _stopped even if a cancellation gets lost in wait_for
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
        for path, ident in self._sockets.items():
            remove_own_socket(path, ident)  # never a file, never another daemon's socket
        self._sockets.clear()
        self._release_locks()
        if self._log is not None:
            self._log.close()
            self._log = None

    def _release_locks(self) -> None:
        for held in self._held:
            held.release()
        self._held.clear()

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

    # --- bytes in, bytes out ----------------------------------------------------------------

    def _deliver(self, gpu: int, sends: list[Send]) -> None:
        for send in sends:
            writer = self._writers.get(send.client_id)
            if writer is None or writer.is_closing():
                continue
            if writer.transport.get_write_buffer_size() > limits.WRITE_BUFFER_MAX:
                writer.close()  # it stopped reading: drop it (its coroutine disconnects it)
                continue
            writer.write(send.message.encode())
        self._wake[gpu].set()

    async def _serve(
        self, gpu: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        pid, uid = _peer(writer)
        why = ""
        if self._open >= limits.MAX_CONNECTIONS:
            why = "too_many_connections"
        elif self._by_pid.get(pid, 0) >= limits.MAX_CONNECTIONS_PER_PROCESS:
            why = "too_many_connections_of_this_process"
        elif self._by_uid.get(uid, 0) >= limits.MAX_CONNECTIONS_PER_USER:
            why = "too_many_connections_of_this_user"
        if why:
            writer.write(error(why).encode())
            writer.close()
            return
        self._open += 1
        self._by_pid[pid] = self._by_pid.get(pid, 0) + 1
        self._by_uid[uid] = self._by_uid.get(uid, 0) + 1
        conn = self.connect(gpu, (uid, pid))
        self._writers[conn.id] = writer  # only a registered client is ever sent to
        try:
            while not self._stopped.is_set():
                try:
                    timeout = None if conn.registered else limits.CONTROL_IDLE_S
                    line = await asyncio.wait_for(reader.readline(), timeout)
                except (ValueError, asyncio.LimitOverrunError):
                    writer.write(error("line_too_long", f"at most {limits.MAX_LINE}").encode())
                    break
                except TimeoutError:
                    writer.write(error("idle", "no request in time").encode())
                    break
                if not line:
                    break
                sends, reply = self.on_line(conn, line, time.monotonic())
                self._deliver(gpu, sends)
                if reply:
                    writer.write(reply)
                    await asyncio.wait_for(writer.drain(), limits.CONTROL_IDLE_S)
                await asyncio.sleep(0)  # one line, then the other connections' turn
        except (ConnectionError, OSError, TimeoutError):
            pass
        finally:
            self._open -= 1
            for counts, key in ((self._by_pid, pid), (self._by_uid, uid)):
                counts[key] -= 1
                if not counts[key]:
                    del counts[key]
            self._writers.pop(conn.id, None)
            gone = time.monotonic()
            self._deliver(gpu, self.on_disconnect(conn, gone))
            writer.close()

    async def _quantum_timer(self, gpu: int) -> None:
        lock, wake = self.locks[gpu], self._wake[gpu]
        while not self._stopped.is_set():
            deadline = lock.next_deadline()
            timeout = None
            if deadline is not None and math.isfinite(deadline):
                timeout = max(0.0, deadline - time.monotonic())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), timeout)
            wake.clear()
            sends = self.on_tick(gpu, time.monotonic())
            if sends:
                self._deliver(gpu, sends)

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
            for _ in range(100):  # headers: bounded in number, each by the reader's limit
                if await asyncio.wait_for(reader.readline(), 5.0) in (b"\r\n", b"\n", b""):
                    break
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
            await asyncio.wait_for(writer.drain(), 5.0)
        except (TimeoutError, ConnectionError, OSError, ValueError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()
