"""Checkpoints bound the crash cost (issue 23, item 5): ``lease.steps(save=...)`` saves
every ``checkpoint_every_s`` of job time and at every extension, so the steps a crash of
the service can cost a job (its reported steps past its last checkpoint) stay within
one interval; and the time scale: grants and reported stepping time are in job time."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from builders import cluster
from rounds_support import wait_for

from gpumosaic.lease import Lease, read_checkpoint_steps
from gpumosaic.run.serve import ServeDescription, Service
from gpumosaic.runtime.executors.contract import InProcessExecutor
from gpumosaic.runtime.leases import LiveLease

STEP_S = 0.005


@pytest.fixture
def service(tmp_path: Path):  # type: ignore[no-untyped-def]
    config = ServeDescription(state=str(tmp_path / "state.db"), port=0, round_s=60.0)
    svc = Service(
        config,
        cluster("v100:1"),
        executor_factory=lambda table: InProcessExecutor(table, time.time, lambda j, m: 1.0),
    )
    svc.start()
    yield svc
    svc.stop()


def client(svc: Service, lease_id: str, ckpt: Path, **env: str) -> Lease:
    return Lease.from_env(
        {
            "GPUMOSAIC_JOB_ID": "7",
            "GPUMOSAIC_SERVER": svc.url,
            "GPUMOSAIC_LEASE_ID": lease_id,
            "GPUMOSAIC_CHECKPOINT_DIR": str(ckpt),
            "GPUMOSAIC_TOTAL_STEPS": "100000",
            **env,
        }
    )


def add_lease(svc: Service, lease_id: str, until: float, seconds: float) -> None:
    now = time.time()
    svc.table.add(
        LiveLease(lease_id, 7, 0, "V100", 0, 1, 100000.0, until, now + seconds, now, 0.0, True)
    )


def test_the_loop_saves_on_its_cadence_so_a_crash_costs_at_most_one_interval(
    service: Service, tmp_path: Path
) -> None:
    add_lease(service, "C1", until=100000, seconds=60)
    ckpt = tmp_path / "ckpt"
    lease = client(service, "C1", ckpt, GPUMOSAIC_CHECKPOINT_EVERY_S="0.2")
    assert lease.checkpoint_every_s == 0.2
    state = {"step": 0}
    worst_lag = 0
    for step in lease.steps(start=0, save=lambda: state):
        time.sleep(STEP_S)
        state["step"] = step + 1
        on_disk = read_checkpoint_steps(ckpt) or 0
        worst_lag = max(worst_lag, state["step"] - int(on_disk))
        if step >= 400:
            break
    assert lease.checkpoints >= 5  # ~2 s of stepping, one save every 0.2 s
    # What a SIGKILL of the service at any step would redo: the steps past the last
    # checkpoint, at most one interval's worth (0.2 s at >= 5 ms a step: <= 40 steps,
    # plus the step in flight and scheduling slack on a loaded machine).
    assert worst_lag <= 0.2 / STEP_S + 20
    job = service.store.job(7)
    assert job is None or job.checkpoint_steps >= 0  # the store saw the checkpoints
    assert any(e.kind == "checkpoint" for e in service.store.events(7))


def test_an_extension_saves_before_the_process_goes_on(service: Service, tmp_path: Path) -> None:
    add_lease(service, "C2", until=10, seconds=60)
    ckpt = tmp_path / "ckpt"
    lease = client(service, "C2", ckpt, GPUMOSAIC_CHECKPOINT_EVERY_S="3600")
    state = {"step": 0}

    def decide() -> None:
        wait_for(lambda: service.table.get("C2").parked, 60, "the job to park")  # type: ignore[union-attr]
        service.table.extend("C2", until_step=20, deadline=time.time() + 60, measured=True)
        wait_for(
            lambda: service.table.get("C2").steps >= 20 and service.table.get("C2").parked,  # type: ignore[union-attr]
            120,
            "the job to park again",
        )
        service.table.stop("C2")

    decider = threading.Thread(target=decide)
    decider.start()
    for step in lease.steps(start=0, save=lambda: state):
        state["step"] = step + 1
    decider.join()
    assert lease.checkpoints == 1  # at the extension only (the cadence is an hour)
    assert read_checkpoint_steps(ckpt) == 10


def test_under_a_time_scale_grants_and_stepping_time_are_job_time(tmp_path: Path) -> None:
    config = ServeDescription(
        state=str(tmp_path / "state.db"), port=0, round_s=60.0, time_scale=100.0
    )
    svc = Service(
        config,
        cluster("v100:1"),
        executor_factory=lambda table: InProcessExecutor(table, time.time, lambda j, m: 1.0),
    )
    svc.start()
    try:
        now = svc.clock()  # job time
        svc.table.add(LiveLease("C3", 7, 0, "V100", 0, 1, 1e5, 1e5, now + 60, now, 0.0, True))
        lease = client(svc, "C3", tmp_path / "ckpt", GPUMOSAIC_TIME_SCALE="100")
        assert lease.time_scale == 100.0
        started = time.monotonic()
        parked_after: list[float] = []

        def decide() -> None:
            wait_for(lambda: svc.table.get("C3").parked, 120, "the job to park")  # type: ignore[union-attr]
            parked_after.append(time.monotonic() - started)
            svc.table.stop("C3")

        decider = threading.Thread(target=decide)
        decider.start()
        for _ in lease.steps(start=0):
            time.sleep(0.01)
        decider.join()
        # 60 s of job time at scale 100: 0.6 s of wall, never less; unscaled it would be
        # 60 s, so the upper bound is far from both (a loaded machine only delays the park).
        assert 0.5 <= parked_after[0] < 30.0
        live = svc.table.get("C3")
        assert live is not None and 50.0 <= live.iter_s <= 70.0  # reported in job time
    finally:
        svc.stop()
