"""Talk to a running share daemon from Python: status, control, metrics (blocking)."""

from __future__ import annotations

import errno
import json
import os
import re
import socket
import stat
from pathlib import Path
from typing import Any

from gpumosaic.runtime.share import limits
from gpumosaic.runtime.share.native import ShareError
from gpumosaic.runtime.share.sockets import check_ancestors, default_socket_dir, socket_path
from gpumosaic.sharing.lock import AntiThrashing

_SOCKET_NAME = re.compile(r"^gpu(\d+)\.sock$")


def check_trusted(socket_dir: Path) -> None:
    """Refuse to talk through a directory that someone else could have put a socket in:
    one writable by group or others, one below a directory that neither root, this user
    nor the socket directory's owner owns (``sockets.check_ancestors``: its owner could
    have swapped in its own), or -- the default directory, whose name carries this user's
    id -- one that neither this user nor root owns."""
    try:
        st = os.lstat(socket_dir)
    except OSError:
        return  # nothing there: the caller says "no share daemon"
    if not stat.S_ISDIR(st.st_mode):
        raise ShareError(f"socket dir {socket_dir} is not a directory (a link or a file)")
    if st.st_mode & 0o022:
        raise ShareError(
            f"socket dir {socket_dir} is writable by group or others (mode "
            f"{stat.S_IMODE(st.st_mode):o}): not trusting a daemon there"
        )
    if socket_dir == default_socket_dir() and st.st_uid not in (0, os.geteuid()):
        raise ShareError(
            f"socket dir {socket_dir} belongs to uid {st.st_uid}, not to this user or root: "
            "not trusting a daemon there"
        )
    check_ancestors(socket_dir, frozenset({os.geteuid(), st.st_uid}))


def daemon_sockets(socket_dir: Path, gpu: int | None = None) -> list[tuple[int, Path]]:
    """The GPU sockets under ``socket_dir`` (only ``gpu``'s when given), by GPU index."""
    check_trusted(socket_dir)
    hint = f"start one with `gpumosaic share daemon --socket-dir {socket_dir}`"
    if gpu is not None:
        path = socket_path(socket_dir, gpu)
        if not path.exists():
            raise ShareError(f"no share daemon for GPU {gpu} at {path} ({hint})")
        return [(gpu, path)]
    found = []
    if socket_dir.is_dir():
        for entry in socket_dir.iterdir():
            m = _SOCKET_NAME.match(entry.name)
            if m:
                found.append((int(m.group(1)), entry))
    if not found:
        raise ShareError(f"no share daemon in {socket_dir} ({hint})")
    return sorted(found)


def _connect(path: Path, timeout_s: float) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    try:
        sock.connect(str(path))
    except OSError as err:
        sock.close()
        reason = err.strerror or str(err)
        if err.errno in (errno.EACCES, errno.EPERM):
            raise ShareError(
                f"the share socket {path} is not writable by this user ({reason}); it is "
                "open to the daemon's user and group"
            ) from None
        raise ShareError(f"no share daemon at {path}: {reason}") from None
    return sock


def request(path: Path, line: str, timeout_s: float = 5.0) -> str:
    """Send one control line; return the reply (for METRICS, the whole text)."""
    with _connect(path, timeout_s) as sock:
        sock.sendall((line + "\n").encode())
        reader = sock.makefile("rb")
        try:
            reply = reader.readline().decode().rstrip("\n")
            if reply.startswith("METRICS lines="):
                count = int(reply.partition("=")[2])
                return "".join(reader.readline().decode() for _ in range(count))
        except (TimeoutError, OSError) as err:
            raise ShareError(f"the share daemon at {path} did not answer: {err}") from None
    if reply.startswith("ERROR"):
        raise ShareError(f"the share daemon at {path} refused {line!r}: {reply}")
    return reply


def check_daemon(path: Path) -> None:
    """Raise a one-line ShareError unless a daemon answers at ``path``."""
    check_trusted(path.parent)
    if not path.exists():
        raise ShareError(
            f"no share daemon at {path} (start one with "
            f"`gpumosaic share daemon --socket-dir {path.parent}`)"
        )
    request(path, "STATUS")


def status(socket_dir: Path, gpu: int | None = None) -> list[dict[str, Any]]:
    out = []
    for _, path in daemon_sockets(socket_dir, gpu):
        reply = request(path, "STATUS")
        kind, _, body = reply.partition(" ")
        if kind != "STATUS":
            raise ShareError(f"unexpected answer from {path}: {reply[:80]}")
        out.append(json.loads(body))
    return out


def control(
    socket_dir: Path,
    gpu: int | None = None,
    tq_s: float | None = None,
    anti_thrashing: AntiThrashing | None = None,
) -> list[int]:
    """Set the TQ and/or the anti-thrashing mode on every GPU (or one); the GPUs changed."""
    if tq_s is not None:
        try:
            tq_s = limits.tq_seconds(tq_s)
        except ValueError as err:
            raise ShareError(f"--tq: {err}") from None
    changed = []
    for index, path in daemon_sockets(socket_dir, gpu):
        if tq_s is not None:
            request(path, f"SET_TQ tq={tq_s!r}")
        if anti_thrashing is not None:
            request(path, f"SET_MODE anti_thrashing={anti_thrashing.value}")
        changed.append(index)
    return changed


def metrics(socket_dir: Path) -> str:
    """Prometheus text of the daemon (one daemon serves all sockets of a directory)."""
    (_, path), *_ = daemon_sockets(socket_dir)
    return request(path, "METRICS")
