"""No client can shut another out (issue 35, class 2): the daemon caps the connections of
one process and of one user (their pid and uid read from the socket), so a client that
opens as many connections as it can still leaves room for another process to register
and to ask STATUS."""

from __future__ import annotations

import subprocess
import sys

from gpumosaic.runtime.share import limits
from gpumosaic.runtime.share.sockets import socket_path

OTHER_PROCESS = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
s.sendall(b"REGISTER pid=2 name=other\\nSTATUS\\n")
reader = s.makefile("rb")
for _ in range(10):  # REGISTER's own answer (SCHED_OFF, ...) comes first
    word = reader.readline().decode().split(" ")[0]
    if word in ("STATUS", "ERROR", ""):
        break
print(word)
"""


def test_one_greedy_process_cannot_keep_another_from_status(served, raw, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(limits, "MAX_CONNECTIONS", 8)
    monkeypatch.setattr(limits, "MAX_CONNECTIONS_PER_PROCESS", 3)
    d = served()
    path = socket_path(d.socket_dir, 0)
    greedy = [raw(path) for _ in range(3)]
    for i, c in enumerate(greedy):
        c.send(f"REGISTER pid={10 + i} name=g\n".encode())
    refused = raw(path).line()
    assert refused == b"ERROR reason=too_many_connections_of_this_process", refused
    other = subprocess.run(
        [sys.executable, "-c", OTHER_PROCESS, str(path)],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert other.stdout.strip() == "STATUS", other
    for c in greedy:
        c.close()
