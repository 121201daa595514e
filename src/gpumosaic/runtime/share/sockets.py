"""The share daemon's socket directory and sockets, handled so that nobody else can stand
in for the daemon and nothing but our own sockets is ever removed (docs/share.md)."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
from pathlib import Path

from gpumosaic.runtime.share.native import ShareError
from gpumosaic.runtime.state.fencing import FileInUse, HeldFile, hold_file

SOCKET_MODE = 0o600
GROUP_SOCKET_MODE = 0o660  # --allow-group
DIR_MODE = 0o700
GROUP_DIR_MODE = 0o750


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


def check_ancestors(path: Path, trusted: frozenset[int]) -> None:
    """Refuse ``path`` unless every directory above it, up to ``/`` or to a private
    directory of this user (mode 0700 or stricter), is owned by root or a ``trusted`` uid
    and writable by nobody else (a root-owned sticky directory like /tmp excepted): the
    owner of any directory on the way could rename the socket directory and put its own,
    with its own socket, in its place. Links are followed first (the resolved path is what
    the kernel walks)."""
    real = Path(os.path.realpath(path))
    for above in real.parents:
        try:
            st = os.stat(above)
        except OSError as err:
            raise ShareError(f"cannot check {above} above {path}: {err.strerror or err}") from None
        if st.st_uid != 0 and st.st_uid not in trusted:
            raise ShareError(
                f"{above} (above the socket dir {path}) belongs to uid {st.st_uid}: its owner "
                "could swap in a socket of its own; refusing it (choose another --socket-dir)"
            )
        sticky_root = st.st_uid == 0 and st.st_mode & stat.S_ISVTX
        if st.st_mode & 0o022 and not sticky_root:
            raise ShareError(
                f"{above} (above the socket dir {path}) is writable by group or others (mode "
                f"{stat.S_IMODE(st.st_mode):o}): refusing it (choose another --socket-dir)"
            )
        if st.st_uid == os.geteuid() and st.st_uid != 0 and not st.st_mode & 0o077:
            return  # this user's private directory: nobody else reaches below it


def prepare_socket_dir(path: Path, allow_group: bool = False) -> None:
    """Create ``path`` 0700 (0750 with ``allow_group``) or accept an existing one only if
    this user owns it, it is a real directory and neither group nor others may write in
    it: whoever can write there can put a socket that impersonates the daemon."""
    mode = GROUP_DIR_MODE if allow_group else DIR_MODE
    created = False
    try:
        # The directories above first (created by this user where missing), so that every
        # one of them exists when it is checked, before the socket dir is made in them.
        path.parent.mkdir(parents=True, exist_ok=True)
        check_ancestors(path, frozenset({os.geteuid()}))
        os.mkdir(path, mode)
        created = True
    except FileExistsError:
        pass
    except OSError as err:
        raise ShareError(f"cannot create socket dir {path}: {err.strerror or err}") from None
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise ShareError(
            f"socket dir {path} is not a directory (a link or a file): refusing it; "
            "remove it or choose another --socket-dir"
        )
    if st.st_uid != os.geteuid():
        raise ShareError(
            f"socket dir {path} belongs to uid {st.st_uid}, not to this user "
            f"({os.geteuid()}): refusing it (its owner could impersonate the daemon); "
            "choose another --socket-dir"
        )
    if st.st_mode & 0o022:
        raise ShareError(
            f"socket dir {path} is writable by group or others (mode "
            f"{stat.S_IMODE(st.st_mode):o}): refusing it; `chmod go-w` it or choose "
            "another --socket-dir"
        )
    if created:
        os.chmod(path, mode)  # mkdir's mode went through the umask
    if not os.access(path, os.W_OK | os.X_OK):
        raise ShareError(f"socket dir {path} is not writable")


def lock_socket(path: Path) -> HeldFile:
    """The one-writer lock of the socket at ``path`` (``fencing.hold_file`` on
    ``<socket>.lock`` in the checked directory): a second daemon for the same GPU socket,
    by whatever path it names the directory, is refused naming the holder's pid."""
    try:
        return hold_file(path.with_name(path.name + ".lock"), "gpumosaic share daemon")
    except FileInUse as err:
        raise ShareError(f"a share daemon already serves {path}: {err.holder}") from None
    except OSError as err:
        raise ShareError(f"cannot lock {path}: {err.strerror or err}") from None


def clear_stale_socket(path: Path) -> None:
    """Make room for the socket at ``path``: a stale socket (its daemon gone) is removed;
    a live one, or anything that is not a socket, is a refusal and stays as it is."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise ShareError(
            f"{path} exists and is not a socket: left alone; remove it yourself "
            "or choose another --socket-dir"
        )
    if _in_use(path):
        raise ShareError(f"a share daemon already serves {path}")
    path.unlink()


def claim_socket(path: Path, allow_group: bool) -> tuple[int, int]:
    """Set the mode of the socket just bound at ``path``; its identity (device, inode)."""
    os.chmod(path, GROUP_SOCKET_MODE if allow_group else SOCKET_MODE)
    st = os.lstat(path)
    return st.st_dev, st.st_ino


def remove_own_socket(path: Path, ident: tuple[int, int]) -> None:
    """Remove ``path`` only if it is still the socket ``claim_socket`` saw."""
    with contextlib.suppress(OSError):
        st = os.lstat(path)
        if stat.S_ISSOCK(st.st_mode) and (st.st_dev, st.st_ino) == ident:
            path.unlink()
