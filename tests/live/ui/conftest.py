"""Round services for the /ui tests on the test run's one local Ray instance (the
``ray_cluster`` fixture of tests/conftest.py), and a headless Chromium when one is
installed (``make browser``)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import Browser, chromium

TRAIN = f"{sys.executable} {Path(__file__).parents[1] / 'rounds' / 'jobs' / 'train.py'}"

needs_chromium = pytest.mark.skipif(
    chromium() is None,
    reason="Debian's chromium is not installed (apt-get install -y chromium, or make browser)",
)


@pytest.fixture
def browser() -> Iterator[Browser]:
    pytest.importorskip("websocket")
    b = Browser()
    yield b
    b.close()


@pytest.fixture
def ui_service(ray_cluster: object, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Start round services on the session's Ray; all are stopped at the test's end."""
    from gpumosaic.live.rounds.service import Service, ServiceConfig, connect_ray

    started: list[Service] = []

    def start(cluster: str = "v100:2,k80:2", **options: object) -> Service:
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
        service = Service(config, connect_ray(config))
        service.start()
        started.append(service)
        return service

    yield start
    for service in started:
        service.stop()


def job_body(steps: float, step_s: float = 0.01, **options: object) -> dict[str, object]:
    return {"command": TRAIN, "steps": steps, "env": {"STEP_S": str(step_s)}, **options}
