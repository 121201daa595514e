"""Chaos: an extender process SIGKILLed again and again while a client binds pods.
Every acknowledged bind is held after each restart, exactly once, and nothing that was
not acknowledged is held twice; no GPU goes over 1,000 milli. Bounded (~20 s)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from test_state import _free_port, extender_process, wait_healthy

from gpumosaic.apps.extender.vocabulary import GPU_MILLI
from waiting import wait_for

NODES = [f"v100-{i:04d}" for i in range(16)]  # --cluster v100:16 as parse_cluster names them
SHARES = (250, 500, 750, 1000)


def _pod(name: str, milli: int) -> dict:
    return {
        "metadata": {
            "name": name,
            "namespace": "chaos",
            "uid": f"uid-{name}",
            "annotations": {GPU_MILLI: str(milli)},
        },
        "spec": {"containers": [{"name": "m", "resources": {"requests": {"cpu": "100m"}}}]},
    }


class Client:
    """Binds pods until stopped; remembers what was acknowledged and what was in flight."""

    def __init__(self, url: str, start: int, rng: np.random.Generator) -> None:
        self.url = url
        self.next = start
        self.rng = rng
        self.acked: dict[str, str] = {}  # pod -> node
        self.unknown: set[str] = set()  # a bind whose answer never came
        self.stop = threading.Event()

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30.0) as http:
            while not self.stop.is_set():
                name = f"p{self.next}"
                self.next += 1
                pod = _pod(name, int(self.rng.choice(SHARES)))
                body = {"Pod": pod, "Nodes": None, "NodeNames": NODES}
                try:
                    passed = http.post("/filter", json=body).json()["NodeNames"]
                    if not passed:
                        continue
                    body["NodeNames"] = passed
                    scores = http.post("/prioritize", json=body).json()
                    node = max(scores, key=lambda s: s["Score"])["Host"]
                except (httpx.HTTPError, ValueError):
                    return  # killed before the bind: nothing was recorded
                bind = {"PodName": name, "PodNamespace": "chaos", "PodUID": f"uid-{name}",
                        "Node": node}  # fmt: skip
                try:
                    r = http.post("/bind", json=bind)
                except httpx.HTTPError:
                    self.unknown.add(name)
                    return
                if r.status_code == 200 and r.json()["Error"] == "":
                    self.acked[name] = node


def _held(url: str) -> tuple[dict[str, list[str]], list[int]]:
    state = httpx.get(f"{url}/state", timeout=10).json()
    where: dict[str, list[str]] = {}
    free = []
    for node in state["nodes"]:
        for gpu in node["gpus"]:
            free.append(gpu["milli_free"])
            for entry in gpu["pods"]:
                where.setdefault(entry.split(":")[0].split("/")[1], []).append(node["name"])
    return where, free


@pytest.mark.slow
def test_sigkill_loop_loses_and_doubles_no_bind(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    db = tmp_path / "s.db"
    acked: dict[str, str] = {}
    unknown: set[str] = set()
    start = 0
    for _ in range(4):
        port = _free_port()
        proc = extender_process(db, port, "v100:16")
        url = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(url, proc)
            where, free = _held(url)  # everything acknowledged so far survived the kill
            assert all(where.get(p) == [n] for p, n in acked.items()), "a bind was lost"
            assert set(where) <= set(acked) | unknown, "a pod nobody bound is held"
            assert min(free) >= 0
            client = Client(url, start, rng)
            thread = threading.Thread(target=client.run)
            thread.start()
            # Kill after a few acknowledged binds, at a random point of the next cycle.
            wanted = int(rng.integers(2, 6))
            # (A client whose call failed has ended: its run is over, kill now.)
            wait_for(
                lambda c=client, t=thread: (len(c.acked), t.is_alive()),
                120,
                f"{wanted} acknowledged binds",
                until=lambda seen, w=wanted: seen[0] >= w or not seen[1],
                poll_s=0.005,
            )
            time.sleep(float(rng.uniform(0.0, 0.03)))
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(30)
        client.stop.set()
        thread.join(30)
        acked |= client.acked
        unknown |= client.unknown
        start = client.next
        # a pod freed by the cluster in the meantime would be released; here none is
    port = _free_port()
    proc = extender_process(db, port, "v100:16")
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, proc)
        where, free = _held(url)
    finally:
        proc.terminate()
        proc.wait(30)
    assert len(acked) >= 8  # the loop did bind
    assert all(where.get(p) == [n] for p, n in acked.items())  # none lost, none doubled
    assert all(len(nodes) == 1 for nodes in where.values())
    assert set(where) <= set(acked) | unknown
    assert min(free) >= 0
