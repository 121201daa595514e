"""Small builders for the round-service tests: a cluster without Ray, and a driver with
the in-process executor on a fake clock."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gpumosaic.mechanisms.rounds.decision import RoundPlan
from gpumosaic.mechanisms.rounds.live.driver import RoundDriver
from gpumosaic.run.serve import ServeDescription, build_decider
from gpumosaic.runtime.cluster import LiveCluster, RayNode, discover
from gpumosaic.runtime.executors.contract import InProcessExecutor
from gpumosaic.runtime.jobs.submission import JobSubmission
from gpumosaic.runtime.leases import LeaseTable
from gpumosaic.runtime.state.store import Store
from gpumosaic.runtime.supervisor.config import DriverConfig


def cluster(counts: str = "v100:2,k80:2") -> LiveCluster:
    models = tuple((m.split(":")[0].upper(), int(m.split(":")[1])) for m in counts.split(","))
    return discover([RayNode("node-a", "127.0.0.1", models)], None)


@dataclass
class FakeClock:
    t: float = 1_000.0

    def __call__(self) -> float:
        return self.t


@dataclass
class Bench:
    store: Store
    driver: RoundDriver
    clock: FakeClock
    executor: InProcessExecutor
    plans: list[RoundPlan] = field(default_factory=list)

    def submit(self, steps: float, gpu_milli: int = 1000, gpus: int = 1, **kw: object) -> int:
        sub = JobSubmission(command="train", steps=steps, gpu_milli=gpu_milli, gpus=gpus, **kw)
        return self.store.add_job(sub, self.clock(), default_retries=2)

    def run_round(self, ticks: int, dt: float) -> RoundPlan:
        plan = self.driver.boundary(self.clock())
        for _ in range(ticks):
            self.clock.t += dt
            self.driver.tick(self.clock())
            if self.driver.round_over(self.clock()):
                break
        return plan

    def states(self) -> dict[int, str]:
        return {j.id: j.state for j in self.store.jobs()}


def in_process(
    tmp: Path,
    counts: str = "v100:2,k80:2",
    policy: str = "max_min_fairness_perf",
    round_s: float = 10.0,
    rate_of: Callable[[int, str], float] = lambda job, model: 2.0 if model == "V100" else 1.0,
    store: Store | None = None,
    clock: FakeClock | None = None,
) -> Bench:
    live = cluster(counts)
    clock = clock or FakeClock()
    store = store or Store(tmp / "state.db")
    table = LeaseTable(store, clock)
    executor = InProcessExecutor(table, clock, rate_of)
    config = ServeDescription(policy=policy, round_s=round_s, state=str(tmp / "state.db"))
    decider, priors = build_decider(config, live)
    plans: list[RoundPlan] = []
    driver = RoundDriver(
        store,
        table,
        executor,
        decider,
        live,
        priors,
        DriverConfig(round_s=round_s, data_dir=str(tmp)),
        clock=clock,
        on_plan=plans.append,
    )
    return Bench(store, driver, clock, executor, plans)
