"""GpuLock, the decisions of the nvshare model and of the share daemon, driven by hand."""

from __future__ import annotations

import math

import pytest

from gpumosaic.sharing.lock import AntiThrashing, Drop, GpuLock, Grant, Revoke, Schedule

MIB = 2**20


def said(decisions) -> list[tuple[int, str]]:
    names = {Grant: "grant", Drop: "drop", Revoke: "revoke"}
    out = []
    for d in decisions:
        if isinstance(d, Schedule):
            out.append((d.client_id, "on" if d.serialized else "off"))
        else:
            out.append((d.client_id, names[type(d)]))
    return out


def lock_with(n: int, mode=AntiThrashing.ON, tq=10.0, grace=None) -> GpuLock:
    lock = GpuLock(0, tq, mode, revoke_grace_s=grace)
    for cid in range(1, n + 1):
        lock.register(cid, 100 + cid, f"c{cid}", 0.0)
    return lock


def test_fcfs_quantum_drop_and_handover() -> None:
    lock = lock_with(3)
    assert lock.request(1, 0.0) == [Grant(1, handover=False)]
    assert said(lock.request(2, 1.0)) == []
    assert said(lock.request(3, 2.0)) == []
    assert lock.next_deadline() == 10.0
    assert said(lock.tick(9.9)) == []
    assert said(lock.tick(10.0)) == [(1, "drop")]
    assert lock.dropping == 1
    assert said(lock.tick(11.0)) == []  # the drop is asked once
    assert lock.next_deadline() is None  # no revocation configured
    assert lock.released(1, 10.5) == [Grant(2, handover=True)]
    assert said(lock.request(1, 10.6)) == []  # back of the line, behind 3
    assert said(lock.tick(20.5)) == [(2, "drop")]
    assert said(lock.released(2, 20.5)) == [(3, "grant")]
    status = lock.status(21.0)
    assert status.handovers == 2 and [w.id for w in status.waiting] == [1]
    assert status.holder is not None and status.holder.id == 3
    assert lock.latencies[0] == pytest.approx(0.5) and lock.latencies[1] == pytest.approx(0.0)
    held = {c.id: c.held_s for c in status.clients}
    assert held == pytest.approx({1: 10.5, 2: 10.0, 3: 0.5})


def test_holder_nobody_waits_for_keeps_the_lock() -> None:
    lock = lock_with(1)
    lock.request(1, 0.0)
    assert said(lock.tick(10.0)) == [] and lock.next_deadline() == 20.0
    # The same holder granted again after an early release is no hand-over.
    lock.released(1, 12.0)
    assert lock.request(1, 13.0) == [Grant(1, handover=False)]


def test_quantum_end_is_reached_at_large_clock_values() -> None:
    # A deadline reached by adding intervals may fall a rounding error short of
    # grant + TQ; the tolerance is relative so that it counts at any clock value.
    now = 1e6
    lock = lock_with(2, tq=0.1)
    lock.request(1, now)
    lock.request(2, now)
    assert said(lock.tick(now + 0.1 - 1e-6)) == [(1, "drop")]


def test_early_release_and_disconnects() -> None:
    lock = lock_with(3)
    lock.request(1, 0.0)
    lock.request(2, 0.0)
    lock.request(3, 0.0)
    assert said(lock.released(1, 2.0)) == [(2, "grant")]  # early: no drop was asked
    assert said(lock.released(1, 2.1)) == []  # a stale release changes nothing
    assert said(lock.disconnect(2, 3.0)) == [(3, "grant")]  # a dead holder frees it
    assert said(lock.disconnect(1, 3.0)) == []
    assert lock.status(3.0).clients[0].id == 3


def test_a_holder_that_ignores_the_drop_is_revoked_tq_plus_grace_after_it() -> None:
    lock = lock_with(3, tq=10.0, grace=0.5)
    lock.request(1, 0.0)
    lock.request(2, 1.0)
    assert said(lock.tick(10.0)) == [(1, "drop")]
    assert lock.next_deadline() == pytest.approx(20.5)  # drop + TQ + grace
    assert said(lock.tick(20.4)) == []
    assert lock.tick(20.5) == [Revoke(1), Grant(2, handover=True)]
    assert lock.revocations == 1 and lock.status(20.5).revocations == 1
    # Its late release changes nothing; asking again puts it at the back of the line.
    assert said(lock.released(1, 21.0)) == []
    assert said(lock.request(3, 21.0)) == [] and said(lock.request(1, 21.0)) == []
    assert [w.id for w in lock.status(21.0).waiting] == [3, 1]
    # A holder that releases in time is never revoked.
    assert said(lock.tick(30.5)) == [(2, "drop")]
    assert said(lock.released(2, 31.0)) == [(3, "grant")]
    assert lock.revocations == 1


def test_off_never_gates_and_auto_follows_memory() -> None:
    off = lock_with(2, AntiThrashing.OFF)
    assert said(off.request(1, 0.0)) == []
    auto = GpuLock(0, 10.0, AntiThrashing.AUTO)
    assert said(auto.register(1, 1, "a", 0.0)) == [(1, "off")]
    assert said(auto.register(2, 2, "b", 0.0)) == [(2, "off")]
    assert said(auto.memory(1, 600 * MIB, 1000 * MIB, 0.0)) == []
    assert said(auto.memory(2, 400 * MIB, 1000 * MIB, 0.0)) == []  # exactly fits
    assert sorted(said(auto.memory(2, 401 * MIB, 1000 * MIB, 1.0))) == [(1, "on"), (2, "on")]
    assert said(auto.request(2, 1.0)) == [(2, "grant")]
    # The big one leaves: the rest fits, everybody runs again.
    assert said(auto.disconnect(1, 2.0)) == [(2, "off")]
    assert auto.status(2.0).holder is None
    # Manual switch, as nvsharectl -S on.
    assert said(auto.set_mode(AntiThrashing.ON, 3.0)) == [(2, "on")]


def test_a_mode_switch_restarts_the_lock_empty() -> None:
    lock = lock_with(2, grace=0.5)
    lock.request(1, 0.0)
    lock.request(2, 0.0)
    lock.tick(10.0)
    assert said(lock.set_mode(AntiThrashing.OFF, 10.1)) == [(1, "off"), (2, "off")]
    assert lock.holder is None and not lock.queue and lock.next_deadline() is None
    assert said(lock.tick(100.0)) == []


@pytest.mark.parametrize("tq", [0.0, -1.0, math.nan, math.inf])
def test_bad_quanta_are_refused(tq) -> None:
    with pytest.raises(ValueError, match="tq"):
        GpuLock(0, tq)
    with pytest.raises(ValueError, match="tq"):
        lock_with(1).set_tq(tq, 0.0)
    with pytest.raises(ValueError, match="grace"):
        GpuLock(0, 1.0, revoke_grace_s=tq if tq != 0.0 else -1.0)
