"""One writer per state file: ``serve --state`` holds an exclusive lock while it runs.

The lock is ``flock`` on ``<state>.lock`` (next to the SQLite file), taken before Ray is
started or a byte of state is read; the kernel releases it when the process ends, however
it ends (SIGKILL included), so a restart never needs cleaning up. The file says who holds
it (pid, host, start time, API URL), and a second ``serve`` on the same state refuses at
once with that line. ``flock`` is per machine: a state directory on a network file
system must support it (NFS v4 does), or two machines could both write (docs/live.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from pathlib import Path

from gpumosaic.errors import InputError


class StateLock:
    def __init__(self, state: Path) -> None:
        self.path = state.with_name(state.name + ".lock")
        self._fd: int | None = None
        self._since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    @classmethod
    def acquire(cls, state: Path) -> StateLock:
        """The lock of ``state``, or an ``InputError`` naming its holder (``--state``)."""
        lock = cls(state)
        try:
            state.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as err:
            raise InputError(
                f"cannot create the lock {lock.path}: {err.strerror}", field="--state", value=state
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _read(fd) or "another process"
            os.close(fd)
            raise InputError(
                f"in use by {holder}; one service per state file (stop it, or use another --state)",
                field="--state",
                value=state,
            ) from None
        lock._fd = fd
        lock.describe("")
        return lock

    def describe(self, url: str) -> None:
        """Write who holds the lock (shown to a second service)."""
        if self._fd is None:
            return
        text = f"gpumosaic serve pid {os.getpid()} on {socket.gethostname()} since {self._since}"
        if url:
            text += f" at {url}"
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, text.encode(), 0)

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing drops the flock
            self._fd = None


def _read(fd: int) -> str:
    try:
        return os.pread(fd, 512, 0).decode("utf-8", "replace").strip()
    except OSError:
        return ""
