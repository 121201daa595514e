"""Helpers that run a round service in this process on the test run's one local Ray
instance (the ``ray_cluster`` fixture of tests/conftest.py)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

JOBS = Path(__file__).parent / "jobs"
TRAIN = f"{sys.executable} {JOBS / 'train.py'}"


def wait_for(
    predicate: Callable[[], bool],
    timeout_s: float,
    what: str,
    explain: Callable[[], str] | None = None,
) -> None:
    give_up = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > give_up:
            detail = f"\n{explain()}" if explain is not None else ""
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}{detail}")
        time.sleep(0.05)


def explain(service) -> Callable[[], str]:  # type: ignore[no-untyped-def]
    """What a service did, for a test that timed out: jobs, leases, last events."""

    def text() -> str:
        store = service.store
        lines = [f"jobs: {[(j.id, j.state, j.steps_done, j.reason) for j in store.jobs()]}"]
        lines += [f"lease {x.id} r{x.round} +{x.extensions} {x.end_reason}" for x in store.leases()]
        lines += [f"event {e.kind} job {e.job_id} {e.detail}" for e in store.events()[-15:]]
        lines.append(f"counters: {service.driver.counters if service.driver else None}")
        return "\n".join(lines)

    return text


@pytest.fixture
def service_factory(ray_cluster: object, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Start round services on the session's Ray; all are stopped at the test's end."""
    from gpumosaic.live.rounds.service import Service, ServiceConfig, connect_ray

    started: list[Service] = []

    def start(cluster: str = "v100:2,k80:2", **options: object) -> Service:
        plans: list[object] = []
        defaults: dict[str, object] = {
            "state": str(tmp_path / f"svc{len(started)}" / "state.db"),
            "port": 0,
            "round_s": 3.0,
            "grace_s": 2.0,
            "start_timeout_s": 30.0,
            "park_margin_s": 5.0,
            "cluster": cluster,
        }
        config = ServiceConfig(**{**defaults, **options})  # type: ignore[arg-type]
        service = Service(config, connect_ray(config), on_plan=plans.append)
        service.plans = plans  # type: ignore[attr-defined]
        service.start()
        started.append(service)
        return service

    yield start
    for service in started:
        service.stop()


def job_body(steps: float, **options: object) -> dict[str, object]:
    env = {"STEP_S": str(options.pop("step_s", 0.01))}
    env.update(options.pop("env", {}))  # type: ignore[arg-type]
    return {"command": TRAIN, "steps": steps, "env": env, **options}


def running_per_round(store) -> dict[int, set[int]]:  # type: ignore[no-untyped-def]
    """Jobs that held a lease in each round, from the store's lease table."""
    out: dict[int, set[int]] = {}
    for lease in store.leases():
        for r in range(lease.round, lease.round + lease.extensions + 1):
            out.setdefault(r, set()).add(lease.job_id)
    return out


@pytest.fixture
def api_factory(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Round services without Ray (the in-process executor: virtual jobs stepping at 50
    steps/s), started on a free port; all are stopped at the test's end."""
    from builders import cluster

    from gpumosaic.live.rounds.executor import InProcessExecutor
    from gpumosaic.live.rounds.service import Service, ServiceConfig

    started: list[Service] = []

    def start(**options: object) -> Service:
        defaults: dict[str, object] = {
            "state": str(tmp_path / f"api{len(started)}" / "state.db"),
            "port": 0,
            "round_s": 1.0,
            "grace_s": 0.5,
        }
        config = ServiceConfig(**{**defaults, **options})  # type: ignore[arg-type]
        service = Service(
            config,
            cluster("v100:2,k80:2"),
            executor_factory=lambda table: InProcessExecutor(table, time.time, lambda j, m: 50.0),
        )
        service.start()
        started.append(service)
        return service

    yield start
    for service in started:
        service.stop()
