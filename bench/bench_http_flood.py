"""RSS of ``gpumosaic serve`` under an unauthenticated flood (issue 35, class 2): the
service (its own process, the in-process executor, a token) receives ``--clients``
concurrent ``POST /v1/jobs/batch`` of just under ``--mib`` MiB each (the batch limit is
16 MiB) without the token, ``--rounds`` times over, from loopback; then as many
authenticated ones (read, then 422: not a job list; or 503 past the bytes-in-flight
budget). Prints the
service's VmRSS before and its peak (VmHWM) after each flood.

    PYTHONPATH=src python bench/bench_http_flood.py [--clients 30] [--mib 16] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

SERVICE = """
import signal, sys, threading, time
from gpumosaic.runtime.cluster import RayNode, discover
from gpumosaic.runtime.executors.contract import InProcessExecutor
from gpumosaic.run.serve import Service, ServeDescription

nodes = [RayNode("node-0", "10.0.0.1", (("V100", 8),))]
config = ServeDescription(state=sys.argv[1], port=int(sys.argv[2]), token="flood-test")
service = Service(config, discover(nodes, None),
                  executor_factory=lambda t: InProcessExecutor(t, time.time, lambda j, m: 10.0))
service.start()
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
print(service.url, flush=True)
stop.wait()
service.stop()
"""


def status_mib(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(field)


def one(port: int, mib: int, token: str | None, codes: Counter[str]) -> None:
    body = b'{"jobs": [' + b" " * ((mib << 20) - 64) + b"]}"  # just under the limit
    head = (
        f"POST /v1/jobs/batch HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        + (f"Authorization: Bearer {token}\r\n" if token else "")
        + "\r\n"
    ).encode()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
            sock.sendall(head)
            sock.sendall(body)
            codes[sock.recv(64).split(b" ")[1].decode()] += 1
    except OSError as err:
        codes[type(err).__name__] += 1


def flood(port: int, clients: int, mib: int, token: str | None) -> dict[str, int]:
    codes: Counter[str] = Counter()
    threads = [threading.Thread(target=one, args=(port, mib, token, codes)) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return dict(codes)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=30)
    parser.add_argument("--mib", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(
            [sys.executable, "-c", SERVICE, str(Path(tmp) / "state.db"), str(port)],
            stdout=subprocess.PIPE, text=True, env={**os.environ},
        )  # fmt: skip
        assert proc.stdout is not None
        proc.stdout.readline()
        try:
            before = status_mib(proc.pid, "VmRSS")
            result: dict[str, object] = {"rss_before_mib": round(before, 1)}
            for label, token in (("unauthenticated", None), ("authenticated", "flood-test")):
                codes: Counter[str] = Counter()
                for _ in range(args.rounds):
                    codes.update(flood(port, args.clients, args.mib, token))
                result[label] = {
                    "answers": dict(codes),
                    "peak_rss_mib": round(status_mib(proc.pid, "VmHWM"), 1),
                }
            result["rss_after_mib"] = round(status_mib(proc.pid, "VmRSS"), 1)
        finally:
            proc.terminate()
            proc.wait(60)
    result.update(clients=args.clients, mib=args.mib, rounds=args.rounds)
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
