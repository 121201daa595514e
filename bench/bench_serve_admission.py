"""Admission under load (issue 23's serve target): 1,000 submissions to ``gpumosaic
serve``'s API, one at a time over HTTP; 0 lost, p99 latency, RSS growth of the service.

The service runs as its own process (so the client's memory is not counted) with the
in-process executor (virtual jobs, no Ray: the API, admission, SQLite store and round
driver are the real ones) on 32 nodes x 8 GPUs of one model and the default 360 s
rounds: the first submission starts a round (1 job planned), the rest queue for the next
boundary. RSS (VmRSS of the service process) is read after a warm-up of 20 submissions
and after the last; "lost" = acknowledged ids not listed by ``GET /v1/jobs`` afterwards.
Targets (issue 23): 0 lost, p99 <= 100 ms, RSS growth <= 20 MiB.

    PYTHONPATH=src python bench/bench_serve_admission.py [--jobs 1000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SERVICE = """
import signal, sys, threading, time
from gpumosaic.runtime.cluster import RayNode, discover
from gpumosaic.runtime.executors.contract import InProcessExecutor
from gpumosaic.run.serve import Service, ServeDescription

nodes = [RayNode(f"node-{i:02d}", f"10.0.0.{i}", (("V100", 8),)) for i in range(32)]
config = ServeDescription(state=sys.argv[1], port=int(sys.argv[2]), placement="strided")
service = Service(
    config,
    discover(nodes, None),
    executor_factory=lambda table: InProcessExecutor(table, time.time, lambda j, m: 10.0),
)
service.start()
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
print(service.url, flush=True)
stop.wait()
service.stop()
"""


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).parents[1] / "src"))
    from gpumosaic.runtime.api.client import ServiceClient

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tmp = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVICE, str(tmp / "state.db"), str(port)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = (proc.stdout.readline() if proc.stdout else "").strip()
        client = ServiceClient(url)
        body = {"command": "python train.py", "steps": 1e6, "gpu_milli": 500, "name": "bench"}
        ids = [client.submit(body) for _ in range(args.warmup)]
        rss_before = rss_mib(proc.pid)
        latency = []
        for _ in range(args.jobs):
            t0 = time.perf_counter()
            ids.append(client.submit(body))
            latency.append(time.perf_counter() - t0)
        rss_after = rss_mib(proc.pid)
        listed = {j["id"] for j in client.jobs()}
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    ms = np.array(latency) * 1000
    result = {
        "submissions": args.jobs,
        "lost": len(set(ids) - listed),
        "p50_ms": round(float(np.percentile(ms, 50)), 1),
        "p99_ms": round(float(np.percentile(ms, 99)), 1),
        "max_ms": round(float(ms.max()), 1),
        "rss_before_mib": round(rss_before, 1),
        "rss_growth_mib": round(rss_after - rss_before, 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
    }
    print(json.dumps(result) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
