"""One writer per state: a service holds an exclusive lock on its state *file* while it runs.

``hold_file`` is the one function every one-writer lock goes through (``serve --state``,
the extender's ``--db``, the share daemon's sockets). The lock is ``flock`` on a
descriptor of the file itself, so it belongs to the file (its inode), not to a name: a
symlink, a hard link or a relative path to the same file reach the same lock, and a
second holder is refused whichever name it used. The kernel releases it when the process
ends, however it ends (SIGKILL included), so a restart never needs cleaning up.

``flock`` and SQLite's own POSIX (``fcntl``) byte-range locks are independent on Linux,
so the lock can sit on the database file SQLite uses. The holder is read from the kernel
(``/proc/locks``: the pid that holds a lock on that inode), plus what the holder wrote in
``<resolved file>.holder`` (its address) when that note is its own. ``flock`` is per
machine: a state directory on a network file system must support it (NFS v4 does), or two
machines could both write (docs/live.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from pathlib import Path

from gpumosaic.errors import InputError


class FileInUse(Exception):
    """Another process holds the lock of the file; ``holder`` says who (pid, command)."""

    def __init__(self, path: Path, holder: str) -> None:
        super().__init__(f"{path} is in use by {holder}")
        self.path = path
        self.holder = holder


class HeldFile:
    """The exclusive lock on one file, held until ``release`` (or the process ends)."""

    def __init__(self, path: Path, fd: int, what: str) -> None:
        self.path = path  # the resolved file
        self.note = path.with_name(path.name + ".holder")
        self._fd: int | None = fd
        self.what = what
        self.since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.describe("")

    @property
    def holder(self) -> str:
        return f"{self.what} pid {os.getpid()} on {socket.gethostname()} since {self.since}"

    def describe(self, url: str) -> None:
        """Write who holds the lock next to the file (shown to a second holder)."""
        text = self.holder + (f" at {url}" if url else "")
        with contextlib.suppress(OSError):
            self.note.write_text(text)

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                if self.note.read_text().startswith(self.holder):
                    self.note.unlink()
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


def hold_file(path: str | Path, what: str, *, create: bool = True) -> HeldFile:
    """Lock ``path`` itself (created empty if missing and ``create``) for this process.

    ``what`` names the holder in the note (``gpumosaic serve``). Raises ``FileInUse`` when
    another open file description holds it (another process, or another holder in this
    one), and ``OSError`` when the file cannot be opened."""
    flags = os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT if create else 0)
    fd = os.open(path, flags, 0o600)
    resolved = Path(os.path.realpath(path))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        st = os.fstat(fd)
        os.close(fd)
        raise FileInUse(resolved, _holder(resolved, st.st_ino)) from None
    return HeldFile(resolved, fd, what)


def _holder(resolved: Path, inode: int) -> str:
    """Who holds the flock on ``inode``: the kernel's pid, with the holder's note when the
    note names that pid (a note can be stale; the kernel cannot)."""
    pids = _flock_pids(inode)
    note = ""
    with contextlib.suppress(OSError):
        note = resolved.with_name(resolved.name + ".holder").read_text()[:300].strip()
    for pid in pids:
        if f" pid {pid} " in note:
            return note
    if not pids:
        return note or "another process"
    pid = pids[0]
    return f"pid {pid} ({_command(pid)})" if _command(pid) else f"pid {pid}"


def _flock_pids(inode: int) -> list[int]:
    """Pids holding a FLOCK on ``inode`` (``/proc/locks``: ``1: FLOCK ADVISORY WRITE pid
    maj:min:inode start end``)."""
    pids = []
    with contextlib.suppress(OSError), open("/proc/locks") as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 6 and fields[1] == "FLOCK" and fields[3] in ("WRITE", "READ"):
                ident = fields[5].rsplit(":", 1)
                if len(ident) == 2 and ident[1] == str(inode) and fields[4].isdigit():
                    pids.append(int(fields[4]))
    return pids


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            words = f.read(400).split(b"\0")
    except OSError:
        return ""
    return " ".join(w.decode("utf-8", "replace") for w in words if w)[:120]


class StateLock:
    """``serve --state``'s lock: ``hold_file`` on the state file, refusals as one
    ``InputError`` naming ``--state``."""

    def __init__(self, held: HeldFile) -> None:
        self._held: HeldFile | None = held
        self.path = held.path

    @classmethod
    def acquire(cls, state: Path) -> StateLock:
        """The lock of ``state``, or an ``InputError`` naming its holder (``--state``)."""
        try:
            state.parent.mkdir(parents=True, exist_ok=True)
            held = hold_file(state, "gpumosaic serve")
        except FileInUse as err:
            raise InputError(
                f"in use by {err.holder}; one service per state file (stop it, or use another "
                "--state)",
                field="--state",
                value=state,
            ) from None
        except OSError as err:
            raise InputError(
                f"cannot open it: {err.strerror or err}", field="--state", value=state
            ) from None
        return cls(held)

    def describe(self, url: str) -> None:
        if self._held is not None:
            self._held.describe(url)

    def release(self) -> None:
        if self._held is not None:
            self._held.release()
            self._held = None
