"""``/ui`` of the scheduler extender: the node mosaic shows every GPU and the pods bound
to it, a bind appears in the recent binds, a release too; no console message."""

from __future__ import annotations

import sys
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "apps" / "extender"))

from browser import Browser, needs_chromium
from extender_builders import args, binding, cluster, service, v1_pod

from gpumosaic.apps.extender.app import create_app
from gpumosaic.apps.extender.ui import ExtenderView
from gpumosaic.apps.extender.wire import ExtenderArgs, ExtenderBindingArgs


def bind(svc, pod: dict, node: str) -> str:  # type: ignore[no-untyped-def]
    svc.filter(ExtenderArgs.model_validate(args(pod, [node])))
    return str(svc.bind(ExtenderBindingArgs.model_validate(binding(pod, node)))["Error"])


def test_view_lists_binds_and_releases_seen_between_refreshes(tmp_path: Path) -> None:
    svc = service(cluster(("V100", 2), ("K80", 1)), tmp_path / "s.db")
    view = ExtenderView(svc)
    first = view.world()
    assert [len(n["gpus"]) for n in first["nodes"].values()] == [2, 1]
    assert first["binds"] == {}
    assert bind(svc, v1_pod(milli=600, name="job-a"), "n0") == ""
    world = view.world()
    gpu_pods = [p for n in world["nodes"].values() for g in n["gpus"] for p in g[1]]
    assert gpu_pods == [["team-a/job-a", 600]]
    (event,) = world["binds"].values()
    assert (event["what"], event["pod"], event["node"], event["milli"]) == (
        "bind",
        "team-a/job-a",
        "n0",
        600,
    )
    assert svc.release_by_name("team-a", "job-a")
    events = list(view.world()["binds"].values())
    assert [e["what"] for e in events] == ["bind", "release"]


@pytest.mark.slow
@needs_chromium
def test_extender_page_shows_nodes_and_binds(tmp_path: Path, serve_app, browser: Browser) -> None:  # type: ignore[no-untyped-def]
    svc = service(cluster(("V100", 2), ("K80", 4)), tmp_path / "s.db")
    url = serve_app(create_app(svc))
    with urllib.request.urlopen(f"{url}/ui", timeout=60) as r:
        assert len(r.read()) < 1_000_000
    browser.open(f"{url}/ui")
    browser.wait_for("document.querySelectorAll('#mosaic .gpu').length === 6", 120, "six GPUs")
    assert bind(svc, v1_pod(milli=500, name="job-b"), "n1") == ""
    browser.wait_for("!!document.querySelector('#binds-table tr[data-bind]')", 120, "the bind")
    assert "team-a/job-b" in browser.js("document.getElementById('binds-table').textContent")
    assert browser.js("document.querySelectorAll('#mosaic .gpu.busy').length") == 1
    assert browser.console == []
