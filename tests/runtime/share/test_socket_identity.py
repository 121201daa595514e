"""A socket is a file under directories, not a string (issue 35, class 1): the share
daemon and its clients check every directory from the socket up (each owned by root or
a trusted user, writable by nobody else), so the owner of a parent cannot swap in its own
socket; and a second daemon for the same socket, by any path, is refused naming the pid."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from gpumosaic.runtime.share import client
from gpumosaic.runtime.share.daemon import ShareDaemon
from gpumosaic.runtime.share.native import ShareError

OTHER_UID = 4242  # a uid that is neither root nor this user


def _needs_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a directory to another uid needs root")


def test_the_daemon_refuses_a_socket_dir_below_another_users_directory(tmp_path: Path) -> None:
    _needs_root()
    parent = tmp_path / "theirs"
    parent.mkdir(mode=0o755)
    os.chown(parent, OTHER_UID, OTHER_UID)
    daemon = ShareDaemon(parent / "share")
    with pytest.raises(ShareError, match=f"belongs to uid {OTHER_UID}"):
        asyncio.run(daemon.start())


def test_a_client_refuses_a_socket_dir_whose_parent_another_user_owns(served, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _needs_root()
    parent = tmp_path / "p"
    parent.mkdir(mode=0o755)
    d = served(parent / "share")
    assert client.status(parent / "share")  # trusted while the parent is this user's
    os.chown(parent, OTHER_UID, OTHER_UID)  # its new owner could rename the dir and swap
    try:
        with pytest.raises(ShareError, match=f"belongs to uid {OTHER_UID}"):
            client.status(parent / "share")
        with pytest.raises(ShareError, match=f"belongs to uid {OTHER_UID}"):
            client.check_daemon(parent / "share" / "gpu0.sock")
    finally:
        os.chown(parent, 0, 0)
        d.stop()


def test_a_group_writable_parent_is_refused_on_both_sides(tmp_path: Path) -> None:
    parent = tmp_path / "open"
    parent.mkdir()
    parent.chmod(0o777)  # not sticky: anyone could rename what is inside
    with pytest.raises(ShareError, match="writable by group or others"):
        asyncio.run(ShareDaemon(parent / "share").start())
    (parent / "share").mkdir(mode=0o700, exist_ok=True)
    with pytest.raises(ShareError, match="writable by group or others"):
        client.status(parent / "share")


def test_a_second_daemon_on_the_same_socket_by_another_path_is_refused(served, tmp_path) -> None:  # type: ignore[no-untyped-def]
    first = served(tmp_path / "real")
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    second = ShareDaemon(Path(os.path.realpath(tmp_path / "alias")) / ".." / "real")
    holder = f"already serves .*: gpumosaic share daemon pid {os.getpid()}"
    with pytest.raises(ShareError, match=holder):
        asyncio.run(second.start())
    assert client.status(tmp_path / "real")[0]["gpu"] == 0  # the first one is untouched
    first.stop()


def _interposed_client(share, sock_dir: Path):  # type: ignore[no-untyped-def]
    """A worker under the interposer (the stand-in libcuda) pointed at ``sock_dir``'s GPU 0."""
    env = {
        "GPUMOSAIC_SHARE_SOCKET": str(sock_dir / "gpu0.sock"),
        "GPUMOSAIC_SHARE_RECONNECT_S": "0",
    }
    proc = share.client("--kernels", "2", extra_env=env)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


def test_the_interposer_refuses_a_socket_dir_whose_parent_another_user_owns(share_factory) -> None:  # type: ignore[no-untyped-def]
    # The C side checks what the Python client checks: an owner of a parent could rename
    # the socket directory and swap in its own socket; the interposer does not register.
    _needs_root()
    share = share_factory()
    sock_dir = share.daemon.socket_dir
    code, out, err = _interposed_client(share, sock_dir)
    assert code == 0, err  # trusted while every parent is root's or this user's
    registered = len([e for e in share.daemon.event_list() if e.get("event") == "REGISTER"])
    assert registered >= 1, share.daemon.event_list()
    parent = sock_dir.parent
    os.chown(parent, OTHER_UID, OTHER_UID)
    try:
        code, out, err = _interposed_client(share, sock_dir)
    finally:
        os.chown(parent, 0, 0)
    assert code != 0 and f"belongs to uid {OTHER_UID}" in err, (code, out, err)
    after = len([e for e in share.daemon.event_list() if e.get("event") == "REGISTER"])
    assert after == registered  # it never spoke to the daemon


def test_the_interposer_refuses_a_group_writable_parent(share_factory) -> None:  # type: ignore[no-untyped-def]
    share = share_factory()
    sock_dir = share.daemon.socket_dir
    parent = sock_dir.parent
    mode = parent.stat().st_mode & 0o7777
    parent.chmod(0o777)  # not sticky: anyone could rename the socket directory
    try:
        code, out, err = _interposed_client(share, sock_dir)
    finally:
        parent.chmod(mode)
    assert code != 0 and "writable by group or others" in err, (code, out, err)
