"""Headless Chromium driven over the DevTools protocol (websocket-client): open a page,
read its console, evaluate JavaScript, take screenshots. One browser per ``Browser``;
``close()`` ends it (and its profile directory)."""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


needs_chromium = pytest.mark.skipif(
    chromium() is None,
    reason="Debian's chromium is not installed (apt-get install -y chromium, or make browser)",
)

TRAIN = f"{sys.executable} {Path(__file__).parents[1] / 'service' / 'jobs' / 'train.py'}"


def job_body(steps: float, step_s: float = 0.01, **options: object) -> dict[str, object]:
    """A submission of the round service tests' tiny training job."""
    return {"command": TRAIN, "steps": steps, "env": {"STEP_S": str(step_s)}, **options}


class Browser:
    def __init__(self, width: int = 1440, height: int = 1000) -> None:
        import websocket  # websocket-client

        exe = chromium()
        assert exe is not None
        self._profile = tempfile.mkdtemp(prefix="gm-chromium-")
        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", "--hide-scrollbars", "--remote-debugging-port=0",
             "--remote-allow-origins=*", f"--user-data-dir={self._profile}",
             f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        port_file = Path(self._profile) / "DevToolsActivePort"
        give_up = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.monotonic() > give_up or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not start its DevTools endpoint")
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=60) as r:
            pages = [t for t in json.load(r) if t["type"] == "page"]
        self.ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=30)
        self._id = 0
        self.console: list[str] = []  # console messages, exceptions and log errors
        for domain in ("Runtime", "Log", "Page"):
            self.call(f"{domain}.enable")
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=width, height=height, deviceScaleFactor=1, mobile=False,
        )  # fmt: skip

    def _note(self, msg: dict[str, Any]) -> None:
        method, p = msg.get("method"), msg.get("params", {})
        if method == "Runtime.consoleAPICalled":
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in p["args"])
            self.console.append(f"console.{p['type']}: {args}")
        elif method == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            self.console.append(
                f"exception: {d.get('exception', {}).get('description', d['text'])}"
            )
        elif method == "Log.entryAdded":
            e = p["entry"]
            self.console.append(f"log.{e['level']}: {e['text']} {e.get('url', '')}")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        mine = self._id
        self.ws.send(json.dumps({"id": mine, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == mine:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return dict(msg.get("result", {}))
            self._note(msg)

    def pump(self, seconds: float) -> None:
        """Read events (console) for ``seconds`` while the page runs."""
        self.ws.settimeout(0.1)
        end = time.monotonic() + seconds
        try:
            while time.monotonic() < end:
                try:
                    self._note(json.loads(self.ws.recv()))
                except Exception as err:  # the socket's timeout: nothing came
                    if "timed out" not in str(err).lower():
                        raise
        finally:
            self.ws.settimeout(30)

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def js(self, expression: str) -> Any:
        out = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in out:
            raise RuntimeError(f"{expression}: {out['exceptionDetails']}")
        return out["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float, what: str) -> Any:
        give_up = time.monotonic() + timeout_s
        while True:
            value = self.js(expression)
            if value:
                return value
            if time.monotonic() > give_up:
                raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
            self.pump(0.2)

    def screenshot(self, path: Path, full_page: bool = True) -> None:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.js(
                "[document.documentElement.scrollWidth, document.documentElement.scrollHeight]"
            )
            params["clip"] = {"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1}
            params["captureBeyondViewport"] = True
        data = self.call("Page.captureScreenshot", **params)["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        ws = getattr(self, "ws", None)
        if ws is not None:
            with contextlib.suppress(Exception):  # closing a dead socket: nothing to do
                ws.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self._profile, ignore_errors=True)


def poll(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    give_up = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > give_up:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(0.05)
