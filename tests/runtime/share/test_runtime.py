"""The real interposer and the real daemon, end to end, against the stand-in libcuda.

Short quanta (0.2 s) and 1 ms kernels keep every test to a few seconds.
"""

from __future__ import annotations

import itertools
import json
import signal
import time

import pytest


def holder_pid(share) -> int | None:
    holder = share.status()["holder"]
    return None if holder is None else holder["pid"]


def finish(proc, timeout_s: float = 30.0) -> dict:
    out, err = proc.communicate(timeout=timeout_s)
    assert proc.returncode == 0, (proc.returncode, out, err)
    return json.loads(out.strip().splitlines()[-1])


def launch_segments(share, pids) -> list[tuple[int, int, int]]:
    """(pid, first launch ns, last launch ns) for each run of consecutive launches."""
    segs: list[list[int]] = []
    for t, pid, call in share.calls():
        if call.startswith("cuLaunchKernel") and pid in pids:
            if segs and segs[-1][0] == pid:
                segs[-1][2] = t
            else:
                segs.append([pid, t, t])
    return [tuple(s) for s in segs]  # type: ignore[misc]


def test_three_clients_fcfs_handover_at_tq_with_sync_before_release(
    share_factory, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    share = share_factory(tq_s=0.2, mode="on")
    # All three start (and register) first; then each starts its launches on its own
    # start line, in order, so that all three compete whatever the machine's speed.
    go = {name: tmp_path / f"go-{name}" for name in "abc"}
    a, b, c = (share.client("--kernels", "800", "--go-file", str(go[n])) for n in "abc")
    share.wait_for(
        lambda: (
            {e["pid"] for e in share.daemon.event_list() if e["event"] == "REGISTER"}
            >= {a.pid, b.pid, c.pid}
        ),
        timeout_s=120,
        what="the three clients registered",
    )
    go["a"].touch()
    share.wait_for(lambda: holder_pid(share) == a.pid, what="A holds")
    go["b"].touch()
    share.wait_for(lambda: len(share.status()["waiting"]) == 1, what="B waits")
    go["c"].touch()
    share.wait_for(lambda: len(share.status()["waiting"]) == 2, what="B and C wait")
    for p in (a, b, c):
        finish(p)
    events = share.daemon.event_list()
    grants = [e["pid"] for e in events if e["event"] == "LOCK_OK"]
    assert grants[:2] == [a.pid, b.pid] and c.pid in grants
    # First come, first served: grants follow the order of the requests, always.
    queue: list[int] = []
    for e in events:
        if e["event"] == "REQ_LOCK":
            queue.append(e["pid"])
        elif e["event"] == "LOCK_OK":
            assert e["pid"] == queue.pop(0)
    assert len(grants) >= 5  # 0.8 s of work each at TQ 0.2 s: several rounds
    # Each DROP_LOCK comes a full quantum after its grant and is answered before the next
    # grant; nobody else is granted in between.
    granted_at: dict[int, int] = {}
    pending_drop = None
    for e in events:
        if e["event"] == "LOCK_OK":
            assert pending_drop is None
            granted_at[e["pid"]] = e["t_ns"]
        elif e["event"] == "DROP_LOCK":
            assert e["t_ns"] - granted_at[e["pid"]] >= 0.2e9 - 1e6
            pending_drop = e["pid"]
        elif e["event"] == "LOCK_RELEASED" and e["pid"] == pending_drop:
            pending_drop = None
    # The device never ran two clients' kernels at once: launches come in segments, and
    # between two segments the previous holder synchronized its context.
    segments = launch_segments(share, {a.pid, b.pid, c.pid})
    assert len(segments) >= 5
    calls = share.calls()
    for (pid, _, last), (nxt, first, _) in itertools.pairwise(segments):
        assert pid != nxt
        synced = [t for t, p, call in calls if p == pid and call == "cuCtxSynchronize"]
        assert any(last <= t <= first for t in synced), "holder did not sync before hand-over"
    assert share.status()["handovers"] >= 4


def test_threaded_clients_never_launch_without_the_lock(share_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # Four launching threads per process race the drop: no launch may land between a
    # client's LOCK_RELEASED and its next LOCK_OK. Both start launching together (once
    # both are registered), so the lock changes hands however slow the machine.
    share = share_factory(tq_s=0.1, mode="on")
    go = tmp_path / "go"
    procs = [
        share.client("--kernels", "800", "--threads", "4", "--go-file", str(go)) for _ in range(2)
    ]
    share.wait_for(
        lambda: (
            {e["pid"] for e in share.daemon.event_list() if e["event"] == "REGISTER"}
            >= {p.pid for p in procs}
        ),
        timeout_s=60,
        what="both clients registered",
    )
    go.touch()
    for p in procs:
        finish(p)
    # The last holder exits holding the lock: wait until the daemon has logged both
    # disconnects, or its final held interval would look open.
    share.wait_for(
        lambda: (
            {e["pid"] for e in share.daemon.event_list() if e["event"] == "DISCONNECT"}
            >= {p.pid for p in procs}
        ),
        what="both disconnects logged",
    )
    events = share.daemon.event_list()
    held: dict[int, list[tuple[int, int]]] = {p.pid: [] for p in procs}
    start: dict[int, int] = {}
    for e in events:
        if e["event"] == "LOCK_OK":
            start[e["pid"]] = e["t_ns"]
        elif e["event"] in ("LOCK_RELEASED", "DISCONNECT") and e["pid"] in start:
            held[e["pid"]].append((start.pop(e["pid"]), e["t_ns"]))
    assert sum(len(v) for v in held.values()) >= 3 and all(held.values())
    launches = [(t, pid) for t, pid, call in share.calls() if "Launch" in call]
    assert len(launches) == 1600
    for t, pid in launches:
        assert any(a <= t <= b for a, b in held[pid]), "a launch ran without the lock"


def test_idle_holder_releases_early(share_factory) -> None:
    share = share_factory(tq_s=30.0, mode="on", GPUMOSAIC_SHARE_IDLE_S="0.2")
    a = share.client("--kernels", "20", "--idle-s", "2", "--kernels-after", "20")
    share.wait_for(lambda: holder_pid(share) == a.pid, what="A holds")
    b = share.client("--kernels", "20")
    finish(b, timeout_s=60)
    finish(a)
    # A released early (idle), before its 30 s quantum: no DROP_LOCK, no revocation, and
    # B's grant follows A's release.
    events = [(e["event"], e["pid"]) for e in share.daemon.event_list()]
    assert ("DROP_LOCK", a.pid) not in events and ("LOCK_REVOKED", a.pid) not in events
    assert ("LOCK_OK", b.pid) in events[events.index(("LOCK_RELEASED", a.pid)) :]
    events = share.daemon.event_list()
    released = [e for e in events if e["event"] == "LOCK_RELEASED" and e["pid"] == a.pid]
    assert released and not any(e["event"] == "DROP_LOCK" for e in events)


def test_anti_thrashing_off_lets_all_run(share_factory) -> None:
    share = share_factory(mode="off")
    procs = [
        share.client("--kernels", "50", "--idle-s", "0.8", "--kernels-after", "50")
        for _ in range(3)
    ]
    for p in procs:
        finish(p)
    events = share.daemon.event_list()
    assert not any(e["event"] in ("LOCK_OK", "REQ_LOCK") for e in events)
    assert sum(e["event"] == "SCHED_OFF" for e in events) == 3
    # Their launch windows overlap: all three ran together.
    spans = []
    for p in procs:
        times = [t for t, pid, call in share.calls() if pid == p.pid and "Launch" in call]
        spans.append((min(times), max(times)))
    assert max(s[0] for s in spans) < min(s[1] for s in spans)


def test_auto_serializes_only_while_working_sets_overflow(share_factory) -> None:
    share = share_factory(mode="auto", FAKECUDA_MEMORY_MIB="1000")
    a = share.client("--alloc-mib", "400", "--hold-s", "30")
    b = share.client("--alloc-mib", "400", "--hold-s", "30")
    share.wait_for(lambda: share.status()["working_set_bytes"] == 800 * 2**20, what="800 MiB")
    status = share.status()
    assert status["serialized"] is False and status["memory_bytes"] == 1000 * 2**20
    c = share.client("--alloc-mib", "400", "--kernels", "20", "--hold-s", "0.5")
    share.wait_for(lambda: share.status()["serialized"], what="serialized at 1200 MiB")
    finish(c)
    share.wait_for(lambda: not share.status()["serialized"], what="free-running again")
    kinds = [(e["event"], e["pid"]) for e in share.daemon.event_list()]
    assert ("SCHED_ON", a.pid) in kinds and ("SCHED_ON", b.pid) in kinds
    last_off = max(i for i, k in enumerate(kinds) if k == ("SCHED_OFF", a.pid))
    assert kinds.index(("SCHED_ON", a.pid)) < last_off
    for p in (a, b):
        p.send_signal(signal.SIGKILL)


def test_killed_holder_frees_the_lock_at_once(share_factory) -> None:
    share = share_factory(tq_s=30.0, mode="on")
    a = share.client("--kernels", "100000")
    share.wait_for(lambda: holder_pid(share) == a.pid, what="A holds")
    b = share.client("--kernels", "10")
    share.wait_for(lambda: len(share.status()["waiting"]) == 1, what="B waits")
    a.send_signal(signal.SIGKILL)
    finish(b, timeout_s=60)
    # At once: B's grant follows A's disconnect, not its quantum's end (no DROP_LOCK to A,
    # no revocation), whatever the machine's speed.
    events = [(e["event"], e["pid"]) for e in share.daemon.event_list()]
    gone = events.index(("DISCONNECT", a.pid))
    assert ("LOCK_OK", b.pid) in events[gone:]
    assert ("DROP_LOCK", a.pid) not in events and ("LOCK_REVOKED", a.pid) not in events


def test_daemon_restart_client_reconnects(share_factory) -> None:
    share = share_factory(tq_s=0.2, mode="on", GPUMOSAIC_SHARE_RECONNECT_S="10")
    a = share.client("--kernels", "20", "--idle-s", "1.5", "--kernels-after", "20")
    share.wait_for(lambda: holder_pid(share) == a.pid, what="A holds")
    share.daemon.stop()
    time.sleep(0.3)
    share.daemon.start()
    _, err = a.communicate(timeout=20)
    assert a.returncode == 0, err
    assert "reconnected" in err


def test_daemon_gone_fails_with_a_clear_error(share_factory) -> None:
    share = share_factory(tq_s=0.2, mode="on", GPUMOSAIC_SHARE_RECONNECT_S="0.5")
    a = share.client("--kernels", "20", "--idle-s", "1.5", "--kernels-after", "20")
    share.wait_for(lambda: holder_pid(share) == a.pid, what="A holds")
    share.daemon.stop()
    out, err = a.communicate(timeout=20)
    assert a.returncode == 3
    assert "did not come back" in err
    assert json.loads(out)["rcs"] == [0, 999]


def test_no_daemon_at_start_is_one_clear_line(share_factory, tmp_path) -> None:
    share = share_factory()
    proc = share.client(
        "--kernels", "1", extra_env={"GPUMOSAIC_SHARE_SOCKET": str(tmp_path / "none.sock")}
    )
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 3 and "no share daemon at" in err
    assert len(err.strip().splitlines()) == 1


def test_allocations_above_physical_memory_succeed_as_managed(share_factory) -> None:
    share = share_factory(mode="on", FAKECUDA_MEMORY_MIB="1000", GPUMOSAIC_SHARE_RESERVE_MIB="100")
    # Without the interposer the device refuses 1,500 MiB (CUDA_ERROR_OUT_OF_MEMORY).
    assert json.loads(
        share.client("--alloc-mib", "1500", preload=False).communicate(timeout=20)[0]
    )["alloc"] == [2]
    # Two processes of 700 MiB each: 1,400 MiB on a 1,000 MiB device, both succeed.
    procs = [share.client("--alloc-mib", "700", "--free") for _ in range(2)]
    outs = [finish(p) for p in procs]
    assert all(o["alloc"] == [0] for o in outs)
    # cuMemGetInfo: the device less the reserve, less this process's own allocations.
    assert all(o["total_mib"] == pytest.approx(900) for o in outs)
    assert all(o["free_mib"] == pytest.approx(200) for o in outs)
    calls = [c for _, pid, c in share.calls() if pid in {p.pid for p in procs}]
    assert calls.count("cuMemAllocManaged") == 2 and "cuMemAlloc_v2" not in calls
    # One process alone above the GPU needs single-process oversubscription switched on.
    alone = share.client("--alloc-mib", "1500")
    assert json.loads(alone.communicate(timeout=20)[0])["alloc"] == [2]
    over = share.client("--alloc-mib", "1500", extra_env={"GPUMOSAIC_SHARE_SINGLE_OVERSUB": "1"})
    assert finish(over)["alloc"] == [0]


@pytest.mark.parametrize("via", ["getproc", "getproc-ptds"])
def test_entry_points_from_cuGetProcAddress_v2_are_gated(share_factory, via) -> None:
    share = share_factory(tq_s=30.0, mode="on", GPUMOSAIC_SHARE_IDLE_S="30")
    a = share.client("--kernels", "100000")
    share.wait_for(lambda: holder_pid(share) == a.pid, what="A holds")
    b = share.client("--via", via, "--kernels", "10")
    share.wait_for(lambda: len(share.status()["waiting"]) == 1, what="B waits")
    time.sleep(0.3)
    assert not [c for c in share.calls() if c[1] == b.pid and "Launch" in c[2]]
    a.send_signal(signal.SIGKILL)
    assert finish(b)["getproc"] == 0
    granted = [
        e["t_ns"]
        for e in share.daemon.event_list()
        if e["event"] == "LOCK_OK" and e["pid"] == b.pid
    ]
    launches = [t for t, pid, c in share.calls() if pid == b.pid and "Launch" in c]
    assert len(launches) == 10 and granted and min(launches) >= granted[0]
