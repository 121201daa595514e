"""Seam: the nvshare model and the share daemon decide the same.

The model is run with its lock recording every call it makes (register, memory, request,
release, leave, quantum check) with its simulated time and the decisions it got. The same
sequence is then sent to a share daemon's core as wire lines (REGISTER, MEM, REQ_LOCK,
LOCK_RELEASED, a closed connection, a timer tick) at the same times, and every message the
daemon sends must be the model's decision, to the same client, at the same step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from gpumosaic.experiments.reproductions.nvshare import job_pair
from gpumosaic.runtime.share import limits
from gpumosaic.runtime.share.daemon import Connection, ShareDaemon
from gpumosaic.runtime.share.protocol import decision_message
from gpumosaic.sharing import NvshareModel, SharedJob
from gpumosaic.sharing import nvshare as nvshare_module
from gpumosaic.sharing.lock import Decision, Drop, GpuLock, Grant, Revoke, Schedule

P100_MIB = 16384.0


@dataclass(frozen=True)
class Call:
    method: str
    client: int | None
    args: tuple
    now: float
    decisions: tuple[Decision, ...]


class RecordingLock(GpuLock):
    """The model's lock, keeping a journal of the calls the model makes (not the lock's
    calls to itself)."""

    journal: list[Call]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.journal = []
        self._depth = 0

    def _record(self, method: str, client, args, now, call: Callable[[], list[Decision]]):
        self._depth += 1
        try:
            decisions = call()
        finally:
            self._depth -= 1
        if self._depth == 0:
            self.journal.append(Call(method, client, args, now, tuple(decisions)))
        return decisions

    def register(self, client_id, pid, name, now):
        call = lambda: super(RecordingLock, self).register(client_id, pid, name, now)  # noqa: E731
        return self._record("register", client_id, (pid, name), now, call)

    def memory(self, client_id, used, total, now):
        call = lambda: super(RecordingLock, self).memory(client_id, used, total, now)  # noqa: E731
        return self._record("memory", client_id, (used, total), now, call)

    def request(self, client_id, now):
        call = lambda: super(RecordingLock, self).request(client_id, now)  # noqa: E731
        return self._record("request", client_id, (), now, call)

    def released(self, client_id, now):
        call = lambda: super(RecordingLock, self).released(client_id, now)  # noqa: E731
        return self._record("released", client_id, (), now, call)

    def disconnect(self, client_id, now):
        call = lambda: super(RecordingLock, self).disconnect(client_id, now)  # noqa: E731
        return self._record("disconnect", client_id, (), now, call)

    def tick(self, now):
        call = lambda: super(RecordingLock, self).tick(now)  # noqa: E731
        return self._record("tick", None, (), now, call)


def model_journal(monkeypatch, model: NvshareModel, jobs, memory_mib: float) -> list[Call]:
    made: list[RecordingLock] = []

    def factory(*args, **kwargs) -> RecordingLock:
        made.append(RecordingLock(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(nvshare_module, "GpuLock", factory)
    outcome = model.simulate(jobs, memory_mib)
    (lock,) = made
    grants = [d for c in lock.journal for d in c.decisions if isinstance(d, Grant)]
    assert sum(d.handover for d in grants) == outcome.handovers
    return lock.journal


def replay_on_daemon(tmp_path: Path, model: NvshareModel, memory_mib: float, journal):
    """Send the journal to a daemon's core; yield (call, expected, sent) per step."""
    daemon = ShareDaemon(
        tmp_path,
        tq_s=model.tq_s,
        anti_thrashing=model.mode,
        memory_mib=memory_mib,
        revoke_grace_s=limits.GRACE_MAX_S,  # the model's clients always release
    )
    conns: dict[int, Connection] = {}
    for call in journal:
        if call.method == "tick":
            sends = daemon.on_tick(0, call.now)
        elif call.method == "disconnect":
            sends = daemon.on_disconnect(conns[call.client], call.now)
        else:
            if call.method == "register":
                conns[call.client] = daemon.connect(0)
                pid, name = call.args
                line = f"REGISTER pid={pid} name={name}"
            elif call.method == "memory":
                line = "MEM bytes={} total={}".format(*call.args)
            else:
                line = {"request": "REQ_LOCK", "released": "LOCK_RELEASED"}[call.method]
            sends, reply = daemon.on_line(conns[call.client], (line + "\n").encode(), call.now)
            assert reply == b"", (call, reply)
        ids = {c: conn.id for c, conn in conns.items()}
        expected = [(ids[d.client_id], decision_message(_renamed(d, ids))) for d in call.decisions]
        sent = [(s.client_id, s.message) for s in sends]
        yield call, expected, sent


def _renamed(d: Decision, ids: dict[int, int]) -> Decision:
    if isinstance(d, Schedule):
        return Schedule(ids[d.client_id], d.serialized)
    return d


def check_seam(monkeypatch, tmp_path, model, jobs, memory_mib=P100_MIB) -> dict[str, int]:
    journal = model_journal(monkeypatch, model, jobs, memory_mib)
    kinds = {"grant": 0, "drop": 0, "schedule": 0, "revoke": 0}
    for call, expected, sent in replay_on_daemon(tmp_path, model, memory_mib, journal):
        assert sent == expected, call
        for d in call.decisions:
            name = {Grant: "grant", Drop: "drop", Schedule: "schedule", Revoke: "revoke"}
            kinds[name[type(d)]] += 1
    return kinds


@pytest.mark.parametrize(
    ("job", "mode", "tq"),
    [
        ("big_50", "on", 30.0),
        ("big_90", "on", 5.0),
        ("small_50", "on", 60.0),
        ("big_50", "auto", 30.0),
        ("small_90", "auto", 30.0),
        ("small_50", "off", 30.0),
    ],
)
def test_the_reproduction_runs_decide_the_same_in_the_daemon(
    monkeypatch, tmp_path, job, mode, tq
) -> None:
    kinds = check_seam(
        monkeypatch, tmp_path, NvshareModel(tq_s=tq, anti_thrashing=mode), job_pair(job)
    )
    if mode == "on" or job.startswith("big"):
        assert kinds["grant"] > 2 and kinds["drop"] > 0
    else:
        assert kinds["grant"] == 0 and kinds["schedule"] == 2


@pytest.mark.parametrize("seed", range(12))
def test_random_gpus_decide_the_same_in_the_daemon(monkeypatch, tmp_path, seed) -> None:
    rng = np.random.default_rng(seed)
    jobs = [
        SharedJob(
            f"j{i}",
            float(rng.uniform(5.0, 200.0)),
            float(rng.choice([0.3, 0.6, 1.0])),
            float(rng.uniform(0.0, 9000.0)),
            [None, 7.0, 40.0][int(rng.integers(0, 3))],
            float(rng.uniform(0.0, 60.0)),
        )
        for i in range(int(rng.integers(2, 6)))
    ]
    mode = ["on", "auto", "off"][seed % 3]
    model = NvshareModel(
        tq_s=float(rng.uniform(2.0, 40.0)), anti_thrashing=mode, idle_release_s=2.0
    )
    check_seam(monkeypatch, tmp_path, model, jobs)
