"""A Gandiva service reports like a round service: attained GPU time and steps/s in
``/v1/jobs`` (done jobs included), its counts in ``/metrics``, and its own ``/ui`` view
(Gandiva's header, progress as ``jobs`` has it, a lone job's GPU held whole). The
service's parts with the in-process executor on a fake clock, driven tick by tick."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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
