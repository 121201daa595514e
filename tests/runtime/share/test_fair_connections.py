"""No client can shut another out (issue 35, class 2): the daemon caps the connections of
one process and of one user (their pid and uid read from the socket), so a client that
opens as many connections as it can still leaves room for another process to register
and to ask STATUS; and the lock's turns go round the users, then their processes
(``runtime/share/fair.py``), so none can keep another from its turn."""

from __future__ import annotations

import subprocess
import sys

import waiting
from gpumosaic.runtime.share import limits
from gpumosaic.runtime.share.daemon import ShareDaemon
from gpumosaic.runtime.share.sockets import socket_path
from gpumosaic.sharing.lock import AntiThrashing

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


# ---- turns: round robin over users, then over a user's processes ---------------------------


def _grants(sends) -> list[int]:  # type: ignore[no-untyped-def]
    return [s.client_id for s in sends if s.message.type.value == "LOCK_OK"]


def test_turns_go_round_the_users_then_their_processes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # User 1000: process 11 with three clients (a, b, c) and process 12 with one (d);
    # user 2000: one client (e). They ask in the order a b c d e. First come first served
    # would give e the lock after four quanta; fair turns give it the second.
    daemon = ShareDaemon(tmp_path / "s", tq_s=1.0, anti_thrashing=AntiThrashing.ON)
    owners = {"a": (1000, 11), "b": (1000, 11), "c": (1000, 11), "d": (1000, 12), "e": (2000, 13)}
    conns = {name: daemon.connect(0, owner) for name, owner in owners.items()}
    name_of = {c.id: name for name, c in conns.items()}
    now = 0.0
    for conn in conns.values():
        daemon.on_line(conn, b"REGISTER pid=1 name=x\n", now)
    order: list[str] = []
    for conn in conns.values():
        sends, _ = daemon.on_line(conn, b"REQ_LOCK\n", now)
        order += [name_of[c] for c in _grants(sends)]
    while len(order) < len(conns):  # each holder releases at once when asked to drop
        now += 1.0
        holder = conns[order[-1]]
        daemon.on_tick(0, now)  # the quantum is over: DROP_LOCK
        sends, _ = daemon.on_line(holder, b"LOCK_RELEASED\n", now)
        order += [name_of[c] for c in _grants(sends)]
    assert order == ["a", "e", "d", "b", "c"]


GREEDY_USER = """
import socket, sys, time
conns = []
for i in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(b"REGISTER pid=1 name=greedy\\nREQ_LOCK\\n")
    conns.append(s)
print("ready", flush=True)
sys.stdin.read()  # hold them (and never release) until told
"""

LATE_PROCESS = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(60)
s.connect(sys.argv[1])
s.sendall(b"REGISTER pid=2 name=late\\nREQ_LOCK\\n")
reader = s.makefile("rb")
while True:
    word = reader.readline().decode().split(" ")[0].strip()
    if word in ("LOCK_OK", ""):
        break
print(word, flush=True)
"""


def test_a_process_asking_after_a_greedy_one_gets_the_next_turn(served, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # Over the socket: the owner is what SO_PEERCRED says. A process holds four clients
    # that asked for the lock (and never release it: each is revoked after TQ + grace);
    # a process that asks later has the second turn, not the fifth.
    d = served(tq_s=0.2, revoke_grace_s=0.1, anti_thrashing=AntiThrashing.ON)
    path = socket_path(d.socket_dir, 0)
    greedy = subprocess.Popen(
        [sys.executable, "-c", GREEDY_USER, str(path), "4"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert greedy.stdout is not None and greedy.stdout.readline().strip() == "ready"
        lock = d.daemon.locks[0]
        waiting.wait_for(lambda: len(d.call(lambda: list(lock.queue))) == 3, 60, "3 waiting")
        late = subprocess.run(
            [sys.executable, "-c", LATE_PROCESS, str(path)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert late.stdout.strip() == "LOCK_OK", late
        grants = [e for e in d.event_list() if e["event"] == "LOCK_OK"]
        assert [e["name"] for e in grants][:2] == ["greedy", "late"], grants
    finally:
        greedy.kill()
        greedy.communicate(timeout=10)
