"""``gpumosaic.lease`` against the real API (uvicorn, no Ray): grants, parking at the
grant's end until the round decision, extension in the same process, stop, checkpoints
and fencing."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from builders import cluster
from rounds_support import wait_for

from gpumosaic.lease import Lease, LeaseError, read_checkpoint_steps
from gpumosaic.run.serve import ServeDescription, Service
from gpumosaic.runtime.executors.contract import InProcessExecutor
from gpumosaic.runtime.leases import LiveLease


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


def add_lease(svc: Service, lease_id: str, until: float, seconds: float) -> None:
    now = time.time()
    svc.table.add(
        LiveLease(lease_id, 7, 0, "V100", 0, 1, 100.0, until, now + seconds, now, 0.0, True)
    )


def client(svc: Service, lease_id: str, ckpt: Path) -> Lease:
    return Lease.from_env(
        {
            "GPUMOSAIC_JOB_ID": "7",
            "GPUMOSAIC_SERVER": svc.url,
            "GPUMOSAIC_LEASE_ID": lease_id,
            "GPUMOSAIC_CHECKPOINT_DIR": str(ckpt),
            "GPUMOSAIC_TOTAL_STEPS": "100",
        }
    )


def test_park_extend_stop_and_checkpoint(service: Service, tmp_path: Path) -> None:
    add_lease(service, "L1", until=10, seconds=60)
    lease = client(service, "L1", tmp_path / "ckpt")
    seen: list[int] = []

    def decide() -> None:
        wait_for(lambda: service.table.get("L1").parked, 60, "the job to park")  # type: ignore[union-attr]
        service.table.extend("L1", until_step=15, deadline=time.time() + 60, measured=True)
        wait_for(
            lambda: (
                service.table.get("L1").steps >= 15  # type: ignore[union-attr]
                and service.table.get("L1").parked
            ),
            120,
            "the job to park again",
        )  # type: ignore[union-attr]
        service.table.stop("L1")

    decider = threading.Thread(target=decide)
    decider.start()
    for step in lease.steps(start=0):
        seen.append(step)
    decider.join()
    assert seen == list(range(15))  # one process across the extension
    live = service.table.get("L1")
    assert live is not None and live.steps == 15 and live.pid is not None
    assert live.extensions == 1
    assert lease.save({"step": 15})
    assert read_checkpoint_steps(tmp_path / "ckpt") == 15
    assert lease.load() == {"step": 15}
    assert any(e.kind == "checkpoint" and e.detail == "15" for e in service.store.events(7))


def test_a_fenced_lease_stops_and_never_writes(service: Service, tmp_path: Path) -> None:
    add_lease(service, "L2", until=50, seconds=60)
    lease = client(service, "L2", tmp_path / "ckpt")
    lease.report_every_s = 0.0  # report at every step: fenced at the next one
    steps = lease.steps(start=0)
    assert next(steps) == 0
    service.table.end("L2")  # a newer lease owns the job now
    assert list(steps) == []  # its next report is answered 410: it stops
    assert not lease.save({"step": 3})
    assert read_checkpoint_steps(tmp_path / "ckpt") is None


def test_outside_the_service_the_lease_says_so() -> None:
    with pytest.raises(LeaseError, match="GPUMOSAIC_JOB_ID"):
        Lease.from_env({})
