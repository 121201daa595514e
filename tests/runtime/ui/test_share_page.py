"""``/ui`` of the share daemon on its metrics port: per GPU the lock holder, the queue and
the hand-overs; fed by two protocol clients over the daemon's UNIX socket (no GPU)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import Browser, needs_chromium, poll

from gpumosaic.runtime.share.daemon import ShareDaemon, socket_path
from gpumosaic.runtime.share.ui import ShareView
from gpumosaic.sharing.lock import AntiThrashing


class Running:
    """A ShareDaemon on its own loop in a thread, with its metrics port."""

    def __init__(self, socket_dir: Path, tq_s: float) -> None:
        self.loop = asyncio.new_event_loop()
        self.daemon = ShareDaemon(socket_dir, (0, 1), tq_s, AntiThrashing.ON, metrics_port=0)
        ready = threading.Event()

        def main() -> None:
            self.loop.run_until_complete(self.daemon.start())
            ready.set()
            self.loop.run_forever()
            self.loop.run_until_complete(self.daemon.stop())

        self.thread = threading.Thread(target=main, daemon=True)
        self.thread.start()
        assert ready.wait(10)
        host, port = self.daemon.metrics_address or ("", 0)
        self.url = f"http://{host}:{port}"

    def call(self, fn):  # type: ignore[no-untyped-def]
        return asyncio.run_coroutine_threadsafe(_call(fn), self.loop).result(5)

    def stop(self) -> None:
        time.sleep(0.6)  # a closed page's stream notices within one refresh and ends
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


async def _call(fn):  # type: ignore[no-untyped-def]
    return fn()


class Client:
    """A process's side of the lock protocol (what the interposer says), by hand."""

    def __init__(self, path: Path, name: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self.file = self.sock.makefile("rwb")
        self.send(f"REGISTER pid={1000 + len(name)} name={name}")
        assert self.read().startswith("SCHED_")

    def send(self, line: str) -> None:
        self.file.write(line.encode() + b"\n")
        self.file.flush()

    def read(self) -> str:
        return self.file.readline().decode().strip()

    def close(self) -> None:
        self.file.close()
        self.sock.close()


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    r = Running(tmp_path / "sock", tq_s=0.3)
    yield r
    r.stop()


def handover(running: Running) -> tuple[Client, Client]:
    """Client a holds GPU 0, b waits; a's quantum ends and it hands over to b."""
    path = socket_path(running.daemon.socket_dir, 0)
    a, b = Client(path, "trainer-a"), Client(path, "trainer-b")
    a.send("REQ_LOCK")
    assert a.read() == "LOCK_OK"
    b.send("REQ_LOCK")
    return a, b


def test_view_sees_holder_queue_and_handover(running: Running) -> None:
    view = ShareView(running.daemon)
    path = socket_path(running.daemon.socket_dir, 0)
    a, b = Client(path, "trainer-a"), Client(path, "trainer-b")
    a.send("REQ_LOCK")
    assert a.read() == "LOCK_OK"
    b.send("REQ_LOCK")
    poll(lambda: len(running.call(view.world)["gpus"]["0"]["waiting"]) == 1, 5, "b to wait")
    world = running.call(view.world)
    gpu = world["gpus"]["0"]
    assert gpu["holder"]["name"] == "trainer-a" and gpu["waiting"][0]["name"] == "trainer-b"
    assert world["gpus"]["1"]["holder"] is None and world["handovers"] == {}
    assert a.read() == "DROP_LOCK"  # the quantum (0.3 s) ended while b waits
    a.send("LOCK_RELEASED")
    assert b.read() == "LOCK_OK"
    world = running.call(view.world)
    assert world["gpus"]["0"]["holder"]["name"] == "trainer-b"
    (event,) = world["handovers"].values()
    assert event["gpu"] == 0 and "trainer-a" in event["from"] and "trainer-b" in event["to"]
    assert world["service"]["s"]["handovers"] == world["gpus"]["0"]["handovers"] >= 1
    a.close()
    b.close()


def test_other_paths_are_still_404_and_metrics_unchanged(running: Running) -> None:
    with urllib.request.urlopen(f"{running.url}/metrics", timeout=5) as r:
        assert b"gpumosaic_share_handovers_total" in r.read()
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(f"{running.url}/uix", timeout=5)
    with urllib.request.urlopen(f"{running.url}/ui", timeout=5) as r:
        assert r.headers["Content-Type"].startswith("text/html") and len(r.read()) < 1_000_000


@pytest.mark.slow
@needs_chromium
def test_share_page_shows_the_lock_holder_and_the_handover(
    running: Running, browser: Browser
) -> None:
    browser.open(f"{running.url}/ui")
    browser.wait_for("document.querySelectorAll('[data-gpu]').length === 2", 120, "two GPU locks")
    a, b = handover(running)
    browser.wait_for(
        "document.getElementById('holder-0').textContent.includes('trainer-a')", 120, "a"
    )
    assert a.read() == "DROP_LOCK"
    a.send("LOCK_RELEASED")
    assert b.read() == "LOCK_OK"
    browser.wait_for(
        "!!document.querySelector('#handovers-table tr[data-handover]')", 120, "hand-over"
    )
    assert "trainer-b" in browser.js("document.getElementById('handovers-table').textContent")
    browser.wait_for(
        "document.getElementById('holder-0').textContent.includes('trainer-b')", 120, "b"
    )
    a.close()
    b.close()
    time.sleep(0.1)
    assert browser.console == []
