"""``/ui`` of ``gpumosaic serve`` in headless Chromium, on the test run's local Ray: the
page renders with no console message, a submitted job appears within one round, a
finished one changes state, the mosaic shows every GPU; the page stays under 1 MB."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from browser import Browser, job_body, needs_chromium

from gpumosaic.runtime.api.client import ServiceClient

PAGE_LIMIT_BYTES = 1_000_000


def fetch(url: str, token: str = "") -> tuple[int, bytes]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, r.read(PAGE_LIMIT_BYTES + 1)
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def row(job_id: int) -> str:
    """JavaScript: the job's row in the jobs table (or null)."""
    return f"document.querySelector('#jobs-table tr[data-job=\"{job_id}\"]')"


def state(job_id: int) -> str:
    """JavaScript: the state the job's row shows (or null)."""
    return f"({row(job_id)} || {{dataset: {{}}}}).dataset.state"


@pytest.mark.slow
@needs_chromium
def test_serve_page_follows_the_cluster(ui_service, browser: Browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The whole page in a real browser on the real service (Ray, real jobs): what only
    Chromium shows (the page renders and follows the stream without a reload, with no
    console message)."""
    service = ui_service(round_s=3.0)
    status, page = fetch(f"{service.url}/ui")
    assert status == 200 and len(page) < PAGE_LIMIT_BYTES
    assert b"http://" not in page and b"https://" not in page  # nothing from a CDN
    client = ServiceClient(service.url)
    first = client.submit(job_body(40, name="first"))
    browser.open(f"{service.url}/ui")
    # The mosaic shows every GPU of the cluster (2 V100 + 2 K80), by node and index.
    gpus = browser.wait_for(
        "document.querySelectorAll('#mosaic .gpu').length === 4 && "
        "Array.from(document.querySelectorAll('#mosaic .gpu')).map(g => g.dataset.gpu)",
        120, "the mosaic's four GPUs",
    )  # fmt: skip
    assert len(set(gpus)) == 4
    # A job submitted while the page is open appears on it, with no reload (the stream's
    # patch; the bound is far above the round of 3 s, as no test asserts a duration).
    browser.js("window.__loaded = performance.timeOrigin")
    second = client.submit(job_body(40, name="second"))
    browser.wait_for(f"!!{row(second)}", 120, "the submitted job on the page")
    # Running: its GPU holds its colour in the mosaic; finished: its row says done.
    browser.wait_for(
        f"!!document.querySelector('#mosaic .seg') && ['running', 'done'].includes({state(first)})",
        60,
        "the first job running",
    )
    browser.wait_for(f"{state(first)} === 'done'", 120, "the first job done")
    assert client.job(first)["state"] == "done"
    assert browser.js("window.__loaded") is not None  # the same document: no reload
    assert browser.js("document.getElementById('live-text').textContent") == "live"
    hist = browser.js("document.querySelectorAll('#hist td[title^=\"round\"]').length")
    assert hist >= 4  # one cell per GPU and round
    browser.screenshot(tmp_path / "serve-ui.png")
    assert (tmp_path / "serve-ui.png").stat().st_size > 10_000
    assert browser.console == []  # no error, no warning, no log line


@pytest.mark.slow
@needs_chromium
def test_token_guards_the_stream_and_the_page_takes_it_once(  # type: ignore[no-untyped-def]
    ui_in_process, browser: Browser
) -> None:
    service = ui_in_process(token="s3cret")  # no job runs: no Ray needed
    assert fetch(f"{service.url}/ui")[0] == 200  # the page holds no data
    assert fetch(f"{service.url}/ui/stream")[0] == 401
    assert fetch(f"{service.url}/ui/stream", "wrong")[0] == 401
    # The page asks for the token; given once in the fragment, it is kept for the tab
    # and removed from the address bar.
    browser.open(f"{service.url}/ui#token=s3cret")
    browser.wait_for("document.querySelectorAll('#mosaic .gpu').length === 4", 120, "the mosaic")
    assert browser.js("location.hash") == ""
    browser.open(f"{service.url}/ui")  # a reload: no token in the URL, still connected
    browser.wait_for("document.querySelectorAll('#mosaic .gpu').length === 4", 120, "the mosaic")
    assert browser.console == []


def test_stream_sends_the_world_then_patches(ui_in_process) -> None:  # type: ignore[no-untyped-def]
    service = ui_in_process()
    client = ServiceClient(service.url)
    request = urllib.request.Request(f"{service.url}/ui/stream")
    with urllib.request.urlopen(request, timeout=60) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        lines: list[bytes] = []
        while not any(line.startswith(b"data: ") for line in lines):
            lines.append(r.readline().rstrip(b"\n"))
        assert b"event: world" in lines
        world = json.loads(next(x for x in lines if x.startswith(b"data: "))[6:])
        event_id = next(x for x in lines if x.startswith(b"id: "))[4:].decode()
    assert set(world) == {"service", "nodes", "gpus", "jobs", "plan", "progress", "rounds"}
    assert len(world["gpus"]) == 4 and world["jobs"] == {}
    job_id = client.submit(job_body(20))
    # Reconnecting with the last id: only the change comes (a patch naming the new job).
    request = urllib.request.Request(
        f"{service.url}/ui/stream", headers={"Last-Event-ID": event_id}
    )
    with urllib.request.urlopen(request, timeout=60) as r:
        patch: dict[str, object] = {}
        kind = b""
        while str(job_id) not in json.dumps(patch.get("set", {})):
            line = r.readline().rstrip(b"\n")
            if line.startswith(b"event: "):
                kind = line[7:]
            if line.startswith(b"data: "):
                assert kind == b"patch"
                patch = json.loads(line[6:])
    assert str(job_id) in patch["set"]["jobs"]  # type: ignore[index]
    assert "nodes" not in patch["set"]  # type: ignore[operator]  # unchanged: not sent again
