"""One job list through every live mechanism (issue 32's seam): under the rounds and
under Gandiva, a job that fits only across servers runs on two nodes and is done, one
that fits nowhere is rejected ``never_fits``, one whose process fails is failed and one
cancelled while it runs is cancelled. Each service's driver on the in-process executor
and a fake clock, driven tick by tick. (The simulated side: ``test_spanning_seam.py``.)"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from gpumosaic.mechanisms.gandiva import GandivaConfig, GandivaDecider
from gpumosaic.mechanisms.gandiva.live.driver import GandivaDriver
from gpumosaic.mechanisms.gandiva.live.throughputs import LiveThroughputs
from gpumosaic.mechanisms.rounds.live.driver import RoundDriver
from gpumosaic.policies.ordering import build_queue_order
from gpumosaic.run.serve import ServeDescription, build_decider
from gpumosaic.runtime.cluster import LiveCluster, RayNode, discover
from gpumosaic.runtime.executors.contract import ExitReport, InProcessExecutor, LaunchSpec
from gpumosaic.runtime.jobs.submission import JobSubmission
from gpumosaic.runtime.leases import LeaseTable
from gpumosaic.runtime.state.store import Store
from gpumosaic.runtime.supervisor.config import DriverConfig


class FakeClock:
    def __init__(self) -> None:
        self.t = 1_000.0

    def __call__(self) -> float:
        return self.t


class FailingExecutor(InProcessExecutor):
    """A job whose command is ``fail`` exits 1 at once."""

    def __init__(self, table: LeaseTable, clock: FakeClock) -> None:
        super().__init__(table, clock, lambda job, model: 2.0)
        self.failing: list[str] = []

    def launch(self, spec: LaunchSpec) -> None:
        if spec.command == "fail":
            self.failing.append(spec.lease_id)
            return
        super().launch(spec)

    def poll(self) -> list[ExitReport]:
        out = [ExitReport(lease, 1, False, "boom", "") for lease in self.failing]
        self.failing.clear()
        return out + super().poll()


Driver = RoundDriver | GandivaDriver
Build = Callable[[Store, LeaseTable, FailingExecutor, LiveCluster, FakeClock, Path], Driver]


def rounds(
    store: Store, table: LeaseTable, ex: FailingExecutor, live: LiveCluster, clock: FakeClock,
    tmp: Path,
) -> Driver:  # fmt: skip
    config = ServeDescription(policy="fifo", round_s=5.0, state=str(tmp))
    decider, priors = build_decider(config, live)
    return RoundDriver(
        store, table, ex, decider, live, priors, DriverConfig(round_s=5.0, data_dir=str(tmp)),
        clock=clock,
    )  # fmt: skip


def gandiva(
    store: Store, table: LeaseTable, ex: FailingExecutor, live: LiveCluster, clock: FakeClock,
    tmp: Path,
) -> Driver:  # fmt: skip
    config = GandivaConfig(quantum_s=5.0, switch_s=0.5, packing=False)
    decider = GandivaDecider(
        live.spec, LiveThroughputs.load(), config, np.random.default_rng(0),
        order=build_queue_order("fifo"),
    )  # fmt: skip
    return GandivaDriver(
        store, table, ex, decider, live, DriverConfig(data_dir=str(tmp)), clock=clock
    )


@pytest.mark.parametrize("build", [rounds, gandiva], ids=["rounds", "gandiva"])
def test_one_job_list_ends_the_same_under_every_live_mechanism(
    tmp_path: Path, build: Build
) -> None:
    live = discover(
        [RayNode(f"node-{i}", f"10.0.0.{i + 1}", (("V100", 2),)) for i in range(2)], None
    )
    clock = FakeClock()
    store = Store(tmp_path / "state.db")
    table = LeaseTable(store, clock)
    executor = FailingExecutor(table, clock)
    driver = build(store, table, executor, live, clock, tmp_path)

    def submit(command: str, steps: float, gpus: int) -> int:
        sub = JobSubmission(command=command, steps=steps, gpus=gpus, max_retries=0)
        return store.add_job(sub, clock(), default_retries=0)

    due = [True]

    def run(seconds: float) -> None:
        """The service loop's calls (``run/serve.py``), on the fake clock."""
        for _ in range(int(seconds / 0.5)):
            clock.t += 0.5
            if due[0]:
                driver.boundary(clock())
            driver.tick(clock())
            due[0] = driver.round_over(clock())

    driver.recover()
    gang, never = submit("train", 20, 4), submit("train", 20, 8)
    run(3.0)
    spans = {len({p[0] for p in row.parts}) for row in store.leases() if row.job_id == gang}
    assert spans == {2}, "the 4-GPU job runs on GPUs of both nodes"
    run(30.0)
    failed, cancelled = submit("fail", 20, 1), submit("train", 1e6, 1)
    run(10.0)
    store.request_cancel(cancelled, clock())
    run(10.0)
    jobs = {j.id: j for j in store.jobs()}
    ends = {i: jobs[i].state for i in (gang, never, failed, cancelled)}
    assert ends == {gang: "done", never: "rejected", failed: "failed", cancelled: "cancelled"}
    assert "never_fits" in jobs[never].reason, jobs[never].reason
