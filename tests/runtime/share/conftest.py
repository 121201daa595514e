"""Fixtures for the share runtime: the built C libraries, a daemon in a thread, clients."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import waiting
from gpumosaic.runtime.share.daemon import ShareDaemon
from gpumosaic.runtime.share.native import library_path
from gpumosaic.runtime.share.sockets import socket_path
from gpumosaic.sharing.lock import AntiThrashing

WORKER = Path(__file__).with_name("worker.py")


@pytest.fixture(scope="session")
def libs() -> tuple[Path, Path]:
    """(interposer, directory holding the stand-in libcuda.so.1)."""
    return library_path("interposer"), library_path("fakecuda").parent


class DaemonThread:
    """A real ShareDaemon on its own event loop in a thread; restartable."""

    def __init__(self, socket_dir: Path, **kwargs: object) -> None:
        self.socket_dir = socket_dir
        self.kwargs = kwargs
        self.events = socket_dir / "events.jsonl"
        self.loop: asyncio.AbstractEventLoop | None = None
        self.daemon: ShareDaemon | None = None
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        ready = threading.Event()

        def main() -> None:
            loop = asyncio.new_event_loop()
            self.loop = loop
            self.daemon = ShareDaemon(self.socket_dir, event_log=self.events, **self.kwargs)  # type: ignore[arg-type]
            loop.run_until_complete(self.daemon.start())
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.daemon.stop())
            loop.close()

        self.thread = threading.Thread(target=main, daemon=True)
        self.thread.start()
        assert ready.wait(10), "daemon did not start"

    def stop(self) -> None:
        if self.loop is not None and self.thread is not None:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop = None
            # A stop that hangs (the quantum timer missing its cancellation) is a failure.
            assert not self.thread.is_alive(), "the daemon did not stop"

    def call(self, fn):  # run fn() on the daemon's loop, return its result
        assert self.loop is not None
        result: list[object] = []
        done = threading.Event()

        def run() -> None:
            result.append(fn())
            done.set()

        self.loop.call_soon_threadsafe(run)
        assert done.wait(5)
        return result[0]

    def event_list(self) -> list[dict]:
        if not self.events.exists():
            return []
        return [json.loads(line) for line in self.events.read_text().splitlines()]


@dataclass
class Share:
    """A daemon plus the environment a client process needs."""

    daemon: DaemonThread
    env: dict[str, str]
    log: Path
    procs: list[subprocess.Popen] = field(default_factory=list)

    def client(self, *args: str, extra_env: dict[str, str] | None = None, preload: bool = True):
        env = dict(self.env)
        if not preload:
            env.pop("LD_PRELOAD")
        env.update(extra_env or {})
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.procs.append(proc)
        return proc

    def calls(self) -> list[tuple[int, int, str]]:
        """(t_ns, pid, call) of every call the stand-in driver saw."""
        out = []
        for line in self.log.read_text().splitlines() if self.log.exists() else []:
            t, pid, call, *_ = line.split()
            out.append((int(t), int(pid), call))
        return out

    def status(self) -> dict:
        lock = self.daemon.daemon.locks[0]  # type: ignore[union-attr]
        return self.daemon.call(lambda: lock.status(time.monotonic()).as_dict())

    def wait_for(self, predicate, timeout_s: float = 120.0, what: str = "condition"):
        """``waiting.wait_for`` with the daemon's status as the account of a timeout."""

        def status() -> str:
            try:
                return repr(self.status())
            except Exception as err:  # the daemon itself may be what failed
                return f"(no daemon status: {err!r})"

        return waiting.wait_for(predicate, timeout_s, what, explain=status, poll_s=0.02)


@pytest.fixture
def share_factory(libs, tmp_path) -> Iterator:
    interposer, fake_dir = libs
    made: list[Share] = []

    def make(
        tq_s: float = 0.2,
        mode: str = "on",
        memory_mib: float | None = None,
        metrics_port: int | None = None,
        grace_s: float = 5.0,
        **env: str,
    ):
        # The grace is generous by default: a drop here drains up to ~1 s of queued 1 ms
        # kernels, and a revocation would let two clients overlap; the revocation tests
        # set it short on purpose.
        sock_dir = tmp_path / f"sock{len(made)}"
        daemon = DaemonThread(
            sock_dir,
            tq_s=tq_s,
            anti_thrashing=AntiThrashing(mode),
            memory_mib=memory_mib,
            metrics_port=metrics_port,
            revoke_grace_s=grace_s,
        )
        daemon.start()
        log = tmp_path / f"cuda{len(made)}.log"
        client_env = dict(os.environ)
        client_env.update(
            LD_PRELOAD=str(interposer),
            LD_LIBRARY_PATH=str(fake_dir),
            GPUMOSAIC_SHARE_SOCKET=str(socket_path(sock_dir, 0)),
            FAKECUDA_LOG=str(log),
            FAKECUDA_KERNEL_US="1000",
            GPUMOSAIC_SHARE_RESERVE_MIB="0",
        )
        client_env.update(env)
        share = Share(daemon, client_env, log)
        made.append(share)
        return share

    yield make
    for share in made:
        for proc in share.procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=10)
        share.daemon.stop()


class Raw:
    """A client that speaks the wire format by hand (no interposer)."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(5)
        self.sock.connect(str(path))
        self.buf = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def line(self, timeout_s: float = 5.0) -> bytes:
        self.sock.settimeout(timeout_s)
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                return b""
            self.buf += chunk
        out, _, self.buf = self.buf.partition(b"\n")
        return out

    def ask(self, data: bytes) -> bytes:
        self.send(data)
        return self.line()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def served(tmp_path):
    made = []

    def start(socket_dir: Path | None = None, **kwargs) -> DaemonThread:
        d = DaemonThread(socket_dir or tmp_path / f"s{len(made)}", **kwargs)
        d.start()
        made.append(d)
        return d

    yield start
    for d in made:
        d.stop()


@pytest.fixture
def raw() -> type[Raw]:
    """The hand-speaking client class: ``raw(path)`` connects."""
    return Raw
