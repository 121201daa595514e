"""Helpers that run a round service in this process on the test run's one local Ray
instance (the ``ray_cluster`` fixture of tests/conftest.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest


@pytest.fixture
def service_factory(ray_cluster: object, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Start round services on the session's Ray; all are stopped at the test's end."""
    from gpumosaic.run.serve import ServeDescription, Service, connect_ray

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
        config = ServeDescription(**{**defaults, **options})  # type: ignore[arg-type]
        service = Service(config, connect_ray(config), on_plan=plans.append)
        service.plans = plans  # type: ignore[attr-defined]
        service.start()
        started.append(service)
        return service

    yield start
    for service in started:
        service.stop()


@pytest.fixture
def api_factory(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Round services without Ray (the in-process executor: virtual jobs stepping at 50
    steps/s), started on a free port; all are stopped at the test's end."""
    from builders import cluster

    from gpumosaic.run.serve import ServeDescription, Service
    from gpumosaic.runtime.executors.contract import InProcessExecutor

    started: list[Service] = []

    def start(**options: object) -> Service:
        defaults: dict[str, object] = {
            "state": str(tmp_path / f"api{len(started)}" / "state.db"),
            "port": 0,
            "round_s": 1.0,
            "grace_s": 0.5,
        }
        config = ServeDescription(**{**defaults, **options})  # type: ignore[arg-type]
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
