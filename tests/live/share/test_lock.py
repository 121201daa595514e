"""GpuLock, the daemon's decisions, driven by hand with explicit times."""

from __future__ import annotations

import pytest

from gpumosaic.live.share.lock import AntiThrashing, GpuLock
from gpumosaic.live.share.protocol import MessageType, ProtocolError, message, parse

MIB = 2**20


def sent(sends) -> list[tuple[int, str]]:
    return [(s.client_id, s.message.type.value) for s in sends]


def lock_with(n: int, mode=AntiThrashing.ON, tq=10.0) -> GpuLock:
    lock = GpuLock(0, tq, mode)
    for cid in range(1, n + 1):
        lock.register(cid, 100 + cid, f"c{cid}", 0.0)
    return lock


def test_fcfs_quantum_drop_and_handover() -> None:
    lock = lock_with(3)
    assert sent(lock.request(1, 0.0)) == [(1, "LOCK_OK")]
    assert sent(lock.request(2, 1.0)) == []
    assert sent(lock.request(3, 2.0)) == []
    assert lock.next_deadline() == 10.0
    assert sent(lock.tick(9.9)) == []
    assert sent(lock.tick(10.0)) == [(1, "DROP_LOCK")]
    assert sent(lock.tick(11.0)) == []  # DROP_LOCK is sent once
    assert sent(lock.released(1, 10.5)) == [(2, "LOCK_OK")]
    assert sent(lock.request(1, 10.6)) == []  # back of the line, behind 3
    assert sent(lock.tick(20.5)) == [(2, "DROP_LOCK")]
    assert sent(lock.released(2, 20.5)) == [(3, "LOCK_OK")]
    status = lock.status(21.0)
    assert status.handovers == 2 and [w.id for w in status.waiting] == [1]
    assert status.holder is not None and status.holder.id == 3
    assert lock.latencies[0] == pytest.approx(0.5) and lock.latencies[1] == pytest.approx(0.0)
    held = {c.id: c.held_s for c in status.clients}
    assert held == pytest.approx({1: 10.5, 2: 10.0, 3: 0.5})


def test_holder_nobody_waits_for_keeps_the_lock() -> None:
    lock = lock_with(1)
    lock.request(1, 0.0)
    assert sent(lock.tick(10.0)) == [] and lock.next_deadline() == 20.0


def test_early_release_and_disconnects() -> None:
    lock = lock_with(3)
    lock.request(1, 0.0)
    lock.request(2, 0.0)
    lock.request(3, 0.0)
    assert sent(lock.released(1, 2.0)) == [(2, "LOCK_OK")]  # early: no drop was asked
    assert sent(lock.released(1, 2.1)) == []  # a stale release changes nothing
    assert sent(lock.disconnect(2, 3.0)) == [(3, "LOCK_OK")]  # a dead holder frees it
    assert sent(lock.disconnect(1, 3.0)) == []
    assert lock.status(3.0).clients[0].id == 3


def test_off_never_gates_and_auto_follows_memory() -> None:
    off = lock_with(2, AntiThrashing.OFF)
    assert sent(off.request(1, 0.0)) == []
    auto = GpuLock(0, 10.0, AntiThrashing.AUTO)
    assert sent(auto.register(1, 1, "a", 0.0)) == [(1, "SCHED_OFF")]
    assert sent(auto.register(2, 2, "b", 0.0)) == [(2, "SCHED_OFF")]
    assert sent(auto.memory(1, 600 * MIB, 1000 * MIB, 0.0)) == []
    assert sent(auto.memory(2, 400 * MIB, 1000 * MIB, 0.0)) == []  # exactly fits
    assert sorted(sent(auto.memory(2, 401 * MIB, 1000 * MIB, 1.0))) == [
        (1, "SCHED_ON"),
        (2, "SCHED_ON"),
    ]
    assert sent(auto.request(2, 1.0)) == [(2, "LOCK_OK")]
    # The big one leaves: the rest fits, everybody runs again.
    assert sent(auto.disconnect(1, 2.0)) == [(2, "SCHED_OFF")]
    assert auto.status(2.0).holder is None
    # Manual switch, as nvsharectl -S on.
    assert sent(auto.set_mode(AntiThrashing.ON, 3.0)) == [(2, "SCHED_ON")]


def test_bad_values_and_wire_format() -> None:
    with pytest.raises(ValueError):
        GpuLock(0, 0.0)
    with pytest.raises(ValueError):
        lock_with(1).set_tq(-1, 0.0)
    msg = parse(b"MEM bytes=10 total=20\n")
    assert msg.type is MessageType.MEM and msg.get("total") == "20"
    assert message(MessageType.SET_TQ, tq=5).encode() == b"SET_TQ tq=5\n"
    for bad in (b"", b"NOPE", b"MEM bytes"):
        with pytest.raises(ProtocolError):
            parse(bad)
