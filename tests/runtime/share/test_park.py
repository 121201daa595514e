"""A process that parks (a lease waiting for its round decision) gives up its GPU's lock:
the real interposer and daemon against the stand-in libcuda, through
``gpumosaic.lease.share_park``."""

from __future__ import annotations

import json

import pytest

from gpumosaic import lease


def holder_pid(share) -> int | None:
    holder = share.status()["holder"]
    return None if holder is None else holder["pid"]


def finish(proc, timeout_s: float = 30.0) -> dict:
    out, err = proc.communicate(timeout=timeout_s)
    assert proc.returncode == 0, (proc.returncode, out, err)
    return json.loads(out.strip().splitlines()[-1])


def test_a_parked_holder_releases_and_its_partner_runs_within_the_quantum(share_factory) -> None:
    # TQ 30 s and no idle release for 30 s: without the park, B would wait 30 s.
    share = share_factory(tq_s=30.0, mode="on", GPUMOSAIC_SHARE_IDLE_S="30")
    a = share.client("--kernels", "20", "--park-after-s", "1.0", "--idle-s", "1.0")
    share.wait_for(lambda: holder_pid(share) == a.pid, what="A holds")
    b = share.client("--kernels", "20")
    share.wait_for(lambda: len(share.status()["waiting"]) == 1, what="B waits")
    finish(b, timeout_s=60)  # long before the quantum's end: no DROP_LOCK (below)
    out = finish(a)
    assert out["park"] == [True, False]  # released once; nothing held the second time
    events = share.daemon.event_list()
    assert not any(e["event"] in ("DROP_LOCK", "LOCK_REVOKED") for e in events)
    released = [e["t_ns"] for e in events if e["event"] == "LOCK_RELEASED" and e["pid"] == a.pid]
    granted_b = [e["t_ns"] for e in events if e["event"] == "LOCK_OK" and e["pid"] == b.pid]
    assert len(released) == 1 and len(granted_b) == 1 and released[0] <= granted_b[0]
    # A synchronized before it released, and B launched only after its grant.
    calls = share.calls()
    a_syncs = [t for t, p, c in calls if p == a.pid and c == "cuCtxSynchronize"]
    assert any(t <= released[0] for t in a_syncs)
    b_launches = [t for t, p, c in calls if p == b.pid and c.startswith("cuLaunchKernel")]
    assert len(b_launches) == 20 and min(b_launches) >= granted_b[0]


def test_a_parked_holder_asks_again_for_its_next_gpu_work(share_factory) -> None:
    share = share_factory(tq_s=30.0, mode="on", GPUMOSAIC_SHARE_IDLE_S="30")
    a = share.client(
        "--kernels", "20", "--park-after-s", "0.2", "--idle-s", "0.3", "--kernels-after", "20"
    )
    out = finish(a)
    assert out["park"] == [True, False] and out["rcs"] == [0]
    events = [e for e in share.daemon.event_list() if e["pid"] == a.pid]
    kinds = [e["event"] for e in events if e["event"] in ("REQ_LOCK", "LOCK_OK", "LOCK_RELEASED")]
    assert kinds[:5] == ["REQ_LOCK", "LOCK_OK", "LOCK_RELEASED", "REQ_LOCK", "LOCK_OK"]
    regrant = [e["t_ns"] for e in events if e["event"] == "LOCK_OK"][1]
    after = [t for t, p, c in share.calls() if p == a.pid and c.startswith("cuLaunchKernel")]
    assert len(after) == 40 and sorted(after)[20] >= regrant  # the second batch waited for it


@pytest.mark.parametrize("mode", ["off"])
def test_park_is_a_no_op_when_work_is_not_serialized(share_factory, mode) -> None:
    share = share_factory(tq_s=30.0, mode=mode)
    out = finish(share.client("--kernels", "20", "--park-after-s", "0"))
    assert out["park"] == [False, False]
    assert not any(e["event"] == "LOCK_RELEASED" for e in share.daemon.event_list())


def test_park_is_a_no_op_without_the_interposer(share_factory, monkeypatch) -> None:
    share = share_factory(tq_s=30.0, mode="on")
    # The socket variable is set but nothing is preloaded: the symbol is not there.
    out = finish(share.client("--kernels", "5", "--park-after-s", "0", preload=False))
    assert out["park"] == [False, False]
    # Nor in a process that is not a shared job at all (this one).
    monkeypatch.delenv(lease.ENV_SHARE_SOCKET, raising=False)
    monkeypatch.setattr(lease, "_share_park_fn", [])
    assert lease.share_park() is False
