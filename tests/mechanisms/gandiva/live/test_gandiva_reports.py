"""A Gandiva service reports like a round service: attained GPU time and steps/s in
``/v1/jobs`` (done jobs included), its counts in ``/metrics``, and its own ``/ui`` view
(Gandiva's header, progress as ``jobs`` has it, a lone job's GPU held whole). The
service's parts with the in-process executor on a fake clock, driven tick by tick."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from gpumosaic.mechanisms.gandiva.live.driver import GandivaDriver
from gpumosaic.mechanisms.gandiva.ui import GandivaView, ui_router
from gpumosaic.run.serve import ServeDescription, Service, build_live_decider
from gpumosaic.runtime.api.app import create_app
from gpumosaic.runtime.cluster import RayNode, discover
from gpumosaic.runtime.executors.contract import InProcessExecutor
from gpumosaic.runtime.jobs.submission import JobSubmission
from gpumosaic.runtime.leases import LeaseTable
from gpumosaic.runtime.supervisor.config import DriverConfig


@dataclass
class FakeClock:
    t: float = 1_000.0

    def __call__(self) -> float:
        return self.t


def test_gandiva_jobs_show_attained_time_and_rates_once_they_ran(tmp_path: Path) -> None:
    clock = FakeClock()
    live = discover([RayNode("n0", "10.0.0.1", (("V100", 2),))], None)
    config = ServeDescription(state=str(tmp_path / "state.db"), port=0, mechanism="gandiva")

    def executor(table: LeaseTable) -> InProcessExecutor:
        return InProcessExecutor(table, clock, lambda job, model: 2.0)

    svc = Service(config, live, executor_factory=executor, clock=clock)
    driver = GandivaDriver(
        svc.store,
        svc.table,
        svc.executor,
        build_live_decider(config, live),  # type: ignore[arg-type]
        live,
        DriverConfig(data_dir=str(tmp_path)),
        clock=clock,
    )
    svc.gandiva_driver = driver
    short = svc.store.add_job(JobSubmission(command="x", steps=20), clock(), 0)
    long = svc.store.add_job(JobSubmission(command="x", steps=10_000), clock(), 0)
    driver.recover()
    for _ in range(30):  # 30 s: the short job is done, the long one runs
        clock.t += 1.0
        driver.tick(clock())
    client = TestClient(create_app(svc, ui=ui_router))
    jobs = {j["id"]: j for j in client.get("/v1/jobs").json()}
    assert jobs[short]["state"] == "done" and jobs[long]["state"] == "running", jobs
    # 20 steps at 2 steps/s alone on one GPU: 10 GPU-seconds, credited at its lease's end.
    assert abs(jobs[short]["attained_s"] - 10.0) < 1.5, jobs[short]
    assert abs(jobs[short]["steps_per_s"] - 2.0) < 1e-6, jobs[short]
    # The running one: its live lease's stepping time so far, and its measured rate.
    assert jobs[long]["attained_s"] > 20.0 and abs(jobs[long]["steps_per_s"] - 2.0) < 1e-6
    assert jobs[long]["suspensions"] == 0 and jobs[long]["packed_with"] is None

    metrics = client.get("/metrics").text
    line = next(x for x in metrics.splitlines() if x.startswith("gpumosaic_gandiva_attained"))
    assert float(line.split()[1]) >= 10.0
    assert "gpumosaic_gandiva_launches_total 2" in metrics

    page = client.get("/ui").text
    assert "Gandiva" in page and "Allocation history" not in page
    world = GandivaView(svc).world()
    header = world["service"]["s"]["header"]
    assert header.startswith("Gandiva · quantum") and "round" not in header
    progress = world["progress"][str(long)][0]
    assert progress == round(jobs[long]["steps_done"], 1)  # as `jobs` has it
    held = [h for holders in world["gpus"].values() for h in holders]
    assert held == [[long, 1000]]  # one whole GPU of two: 50 % of the milli-GPU held
    assert world["jobs"][str(short)]["attained_s"] >= 9.0


def _service(
    tmp_path: Path, clock: FakeClock, mechanism: str, nodes: int = 1
) -> tuple[Service, GandivaDriver]:
    live = discover(
        [RayNode(f"n{i}", f"10.0.0.{i + 1}", (("V100", 1),)) for i in range(nodes)], None
    )
    config = ServeDescription(state=str(tmp_path / "state.db"), port=0, mechanism=mechanism)

    def executor(table: LeaseTable) -> InProcessExecutor:
        return InProcessExecutor(table, clock, lambda job, model: 2.0)

    svc = Service(config, live, executor_factory=executor, clock=clock)
    driver = GandivaDriver(
        svc.store,
        svc.table,
        svc.executor,
        build_live_decider(config, live),  # type: ignore[arg-type]
        live,
        DriverConfig(data_dir=str(tmp_path)),
        clock=clock,
    )
    svc.gandiva_driver = driver
    return svc, driver


def test_suspensions_migrations_and_partners_show_in_jobs_metrics_and_ui(tmp_path: Path) -> None:
    """Time-slicing and a move (two one-GPU servers, three jobs), then a packed pair: each
    count is the same in ``/v1/jobs``, the ``/ui`` view and ``/metrics``."""
    clock = FakeClock()
    svc, driver = _service(
        tmp_path, clock, "gandiva:quantum=2,switch=0.1,packing=off,migration=on", nodes=2
    )
    ids = [svc.store.add_job(JobSubmission(command="x", steps=s), clock(), 0) for s in (20, 40, 40)]
    driver.recover()
    for _ in range(120):
        clock.t += 0.5
        driver.tick(clock())
    client = TestClient(create_app(svc, ui=ui_router))
    jobs = {j["id"]: j for j in client.get("/v1/jobs").json()}
    assert {jobs[i]["state"] for i in ids} == {"done"}, jobs
    world = GandivaView(svc).world()["jobs"]
    for i in ids:
        for key in ("suspensions", "migrations", "attained_s"):
            assert world[str(i)][key] == pytest.approx(jobs[i][key], abs=0.1), (i, key)
        assert jobs[i]["attained_s"] > 0 and jobs[i]["steps_per_s"] == pytest.approx(2.0)
    suspended = sum(jobs[i]["suspensions"] for i in ids)
    moved = sum(jobs[i]["migrations"] for i in ids)
    assert suspended > 0 and moved > 0
    metrics = dict(
        line.split()[:2] for line in client.get("/metrics").text.splitlines() if line[:1] != "#"
    )
    assert float(metrics["gpumosaic_gandiva_migrations_total"]) == moved
    assert float(metrics["gpumosaic_gandiva_suspensions_total"]) == suspended


def test_a_packed_partner_shows_in_jobs_metrics_and_ui(tmp_path: Path) -> None:
    clock = FakeClock()
    svc, driver = _service(tmp_path, clock, "gandiva:quantum=60,switch=0.1,profile=5")
    pair = "ResNet-18 (batch size 32)"  # Gavel's table: two of them pack with a gain
    a, b = (
        svc.store.add_job(JobSubmission(command="x", steps=1e5, job_type=pair), clock(), 0)
        for _ in range(2)
    )
    driver.recover()
    for _ in range(4):  # 2 s: the pair runs on trial (its verdict is due at 5 s)
        clock.t += 0.5
        driver.tick(clock())
    client = TestClient(create_app(svc, ui=ui_router))
    jobs = {j["id"]: j for j in client.get("/v1/jobs").json()}
    assert (jobs[a]["packed_with"], jobs[b]["packed_with"]) == (b, a), jobs
    world = GandivaView(svc).world()["jobs"]
    assert (world[str(a)]["packed_with"], world[str(b)]["packed_with"]) == (b, a)
    assert "gpumosaic_gandiva_packed_jobs 2" in client.get("/metrics").text
