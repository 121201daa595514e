"""The local Ray instance the project starts (``ray_connect.init_local_ray``: tests,
``serve`` without ``--ray-address``, ``sim-vs-live``, studies on Ray) uses and listens on
127.0.0.1 only. Ray on Linux would otherwise take the machine's own address for
``_node_ip_address="127.0.0.1"`` and listen on every interface."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _socket_inodes(pids: set[int]) -> set[str]:
    inodes = set()
    for pid in pids:
        fd_dir = Path(f"/proc/{pid}/fd")
        try:
            for fd in fd_dir.iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    return inodes


def _listening(inodes: set[str]) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The local addresses of the TCP sockets in LISTEN state among ``inodes``."""
    out: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = []
    for name, size in (("tcp", 4), ("tcp6", 16)):
        try:
            lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(fields[1].split(":")[0])
            # /proc writes each 32-bit word of the address in host (little-endian) order
            words = b"".join(raw[i : i + 4][::-1] for i in range(0, size, 4))
            addr = ipaddress.ip_address(words)
            if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
                addr = addr.ipv4_mapped
            out.append(addr)
    return out


def test_the_local_ray_is_on_loopback_only(ray_cluster: object) -> None:
    import ray

    assert {node["NodeManagerAddress"] for node in ray.nodes()} == {"127.0.0.1"}
    daemons = _descendants(os.getpid())
    assert daemons, "the session's Ray has no daemons under this process"
    listening = _listening(_socket_inodes(daemons))
    assert listening, "no listening socket found for Ray's daemons"
    assert all(addr.is_loopback for addr in listening), listening
