"""Round services for the /ui tests on the test run's one local Ray instance (the
``ray_cluster`` fixture of tests/conftest.py), and a headless Chromium when one is
installed (``make browser``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import Browser

from waiting import wait_for


@pytest.fixture
def browser() -> Iterator[Browser]:
    pytest.importorskip("websocket")
    b = Browser()
    yield b
    b.close()


@pytest.fixture
def ui_service(ray_cluster: object, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Start round services on the session's Ray; all are stopped at the test's end."""
    from gpumosaic.run.serve import ServeDescription, Service, connect_ray

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
        config = ServeDescription(**{**defaults, **options})  # type: ignore[arg-type]
        service = Service(config, connect_ray(config))
        service.start()
        started.append(service)
        return service

    yield start
    for service in started:
        service.stop()


@pytest.fixture
def ui_in_process(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Round services without Ray (cluster v100:2,k80:2; the in-process executor: virtual
    jobs stepping at 50 steps/s), for what the page's data needs no real job for."""
    import time

    from gpumosaic.run.serve import ServeDescription, Service
    from gpumosaic.runtime.cluster import RayNode, discover
    from gpumosaic.runtime.executors.contract import InProcessExecutor

    live = discover([RayNode("node-a", "127.0.0.1", (("V100", 2), ("K80", 2)))], None)
    started: list[Service] = []

    def start(**options: object) -> Service:
        defaults: dict[str, object] = {
            "state": str(tmp_path / f"svc{len(started)}" / "state.db"),
            "port": 0,
            "round_s": 3.0,
            "grace_s": 2.0,
        }
        config = ServeDescription(**{**defaults, **options})  # type: ignore[arg-type]
        service = Service(
            config,
            live,
            executor_factory=lambda table: InProcessExecutor(table, time.time, lambda j, m: 50.0),
        )
        service.start()
        started.append(service)
        return service

    yield start
    for service in started:
        service.stop()


@pytest.fixture
def serve_app():  # type: ignore[no-untyped-def]
    """Serve FastAPI apps with uvicorn on 127.0.0.1 (a free port) in threads; returns the
    base URL; every server is stopped at the test's end."""
    import threading

    import uvicorn

    servers: list[tuple[uvicorn.Server, threading.Thread]] = []

    def start(app: object) -> str:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")  # type: ignore[arg-type]
        server = uvicorn.Server(config)
        server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        wait_for(
            lambda: server.started or not thread.is_alive(), 60, "uvicorn to start", poll_s=0.02
        )
        assert server.started, "uvicorn's thread ended before it started serving"
        servers.append((server, thread))
        port = server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join(10)
