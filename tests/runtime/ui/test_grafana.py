"""deploy/grafana/gpumosaic.json: every expression names only metrics the three services
export (read from each service's own /metrics after some work), every panel is valid."""

from __future__ import annotations

import json
import re
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from waiting import wait_for

sys.path.insert(0, str(Path(__file__).parents[2] / "apps" / "extender"))

from extender_builders import args, binding, cluster, service, v1_pod

DASHBOARD = Path(__file__).parents[3] / "deploy" / "grafana" / "gpumosaic.json"
NAME = re.compile(r"\bgpumosaic_[a-z0-9_]+")


def sample_names(text: str) -> set[str]:
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}


def serve_metrics(tmp_path: Path) -> str:
    from gpumosaic.run.serve import ServeDescription, Service
    from gpumosaic.runtime.cluster import RayNode, discover
    from gpumosaic.runtime.executors.contract import InProcessExecutor
    from gpumosaic.runtime.jobs.submission import JobSubmission
    from gpumosaic.runtime.leases import LeaseTable

    live = discover([RayNode("n0", "10.0.0.1", (("V100", 2),))], None)
    config = ServeDescription(state=str(tmp_path / "serve" / "state.db"), port=0, round_s=1.0)

    def executor(table: LeaseTable) -> InProcessExecutor:
        return InProcessExecutor(table, time.time, lambda job, model: 50.0)

    svc = Service(config, live, executor_factory=executor)
    svc.start()
    try:
        svc.store.add_job(JobSubmission(command="x", steps=20.0), time.time(), 0)
        wait_for(
            lambda: svc.driver.counters.rounds if svc.driver is not None else None,
            60,
            "two rounds",
            until=lambda rounds: rounds is not None and rounds >= 2,
        )
        with urllib.request.urlopen(f"{svc.url}/metrics", timeout=60) as r:
            return r.read().decode()
    finally:
        svc.stop()


def extender_metrics(tmp_path: Path) -> str:
    from fastapi.testclient import TestClient

    from gpumosaic.apps.extender.app import create_app

    svc = service(cluster(("V100", 2)), tmp_path / "extender.db")
    client = TestClient(create_app(svc))
    pod = v1_pod(milli=500, name="p")
    assert client.post("/filter", json=args(pod, ["n0"])).status_code == 200
    assert client.post("/bind", json=binding(pod, "n0")).json()["Error"] == ""
    return client.get("/metrics").text


def share_metrics() -> str:
    from gpumosaic.runtime.share.metrics import prometheus_text
    from gpumosaic.sharing.lock import AntiThrashing, GpuLock

    lock = GpuLock(0, 0.1, AntiThrashing.ON, None)
    lock.register(1, 100, "a", 0.0)
    lock.register(2, 200, "b", 0.0)
    lock.memory(1, 2**30, 16 * 2**30, 0.0)
    lock.request(1, 0.0)
    lock.request(2, 0.01)
    lock.tick(0.2)  # a's quantum is over, b waits: DROP_LOCK to a
    lock.released(1, 0.25)  # a hands over: one latency measured
    status = lock.status(0.3)
    assert status.handovers >= 1 and status.memory_bytes is not None
    return prometheus_text([status], [(lock.latency_sum, lock.latency_count)])


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """Sample names each service exports (serve: with the in-process executor, no Ray)."""
    tmp = tmp_path_factory.mktemp("metrics")
    return {
        "serve": sample_names(serve_metrics(tmp)),
        "extender": sample_names(extender_metrics(tmp)),
        "share": sample_names(share_metrics()),
    }


def expressions(dashboard: dict) -> list[tuple[str, str]]:
    return [
        (panel["title"], target["expr"])
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]


def test_every_expression_names_an_exported_metric(exported: dict[str, set[str]]) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    every = set().union(*exported.values())
    exprs = expressions(dashboard)
    assert len(exprs) >= 20
    for title, expr in exprs:
        names = NAME.findall(expr)
        assert names, (title, expr)
        for name in names:
            assert name in every, f"panel {title!r}: {name} is not exported by any service"
    # Each service has its panels, naming its own metrics.
    used = {n for _, e in exprs for n in NAME.findall(e)}
    for svc, names in exported.items():
        assert used & names, f"no panel for {svc}"


def test_dashboard_is_a_valid_grafana_document() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["schemaVersion"] >= 36
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        box = panel["gridPos"]
        assert box["x"] >= 0 and box["x"] + box["w"] <= 24, panel["title"]
        refs = [t["refId"] for t in panel.get("targets", [])]
        assert len(refs) == len(set(refs)), panel["title"]
        for target in panel.get("targets", []):
            assert target["datasource"]["uid"] == "${datasource}"
            assert target["expr"].count("(") == target["expr"].count(")"), target["expr"]
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    assert {"datasource", "job"} <= variables
