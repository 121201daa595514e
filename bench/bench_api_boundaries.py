"""API latency during round boundaries (issue 35, class 5): ``gpumosaic serve``'s API
(real uvicorn on 127.0.0.1) with 500 jobs on 64 logical GPUs (8 nodes x 8 V100, the
in-process executor: virtual jobs, no Ray), each launch taking ``--launch-ms`` (Ray's
actor start is tens of ms to seconds; 20 ms by default). Two client threads read
``GET /v1/jobs/{id}`` back to back for ``--rounds`` rounds of ``--round-s`` seconds; a
request counts as "during a boundary" when it overlaps one (the driver's boundary, timed
from its start to its return, launches included). Prints p50/p99/max of both sets and the
boundaries' own durations.

    PYTHONPATH=src python bench/bench_api_boundaries.py [--jobs 500] [--launch-ms 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np

from gpumosaic.run.serve import ServeDescription, Service
from gpumosaic.runtime.cluster import RayNode, discover
from gpumosaic.runtime.executors.contract import InProcessExecutor, LaunchSpec
from gpumosaic.runtime.leases import LeaseTable


def slow_executor(launch_s: float):  # type: ignore[no-untyped-def]
    def make(table: LeaseTable) -> InProcessExecutor:
        executor = InProcessExecutor(table, time.time, lambda j, m: 10.0)
        launch = executor.launch

        def slow(spec: LaunchSpec) -> None:
            time.sleep(launch_s)
            launch(spec)

        executor.launch = slow  # type: ignore[method-assign]
        return executor

    return make


def percentiles(xs: list[float]) -> dict[str, float]:
    if not xs:
        return {"n": 0}
    a = np.asarray(xs) * 1000
    return {
        "n": len(xs),
        "p50_ms": round(float(np.percentile(a, 50)), 1),
        "p99_ms": round(float(np.percentile(a, 99)), 1),
        "max_ms": round(float(a.max()), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--launch-ms", type=float, default=20.0)
    parser.add_argument("--round-s", type=float, default=6.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    nodes = [RayNode(f"node-{i}", f"10.0.0.{i}", (("V100", 8),)) for i in range(8)]
    with tempfile.TemporaryDirectory() as tmp:
        config = ServeDescription(
            state=str(Path(tmp) / "state.db"), port=0, round_s=args.round_s, grace_s=0.5
        )
        service = Service(config, discover(nodes, None), slow_executor(args.launch_ms / 1000))
        windows: list[tuple[float, float]] = []
        service.start()
        driver = service.driver
        assert driver is not None
        boundary = driver.boundary

        def timed(now: float):  # type: ignore[no-untyped-def]
            t0 = time.monotonic()
            try:
                return boundary(now)
            finally:
                windows.append((t0, time.monotonic()))

        driver.boundary = timed  # type: ignore[method-assign]
        body = json.dumps(
            {"jobs": [{"command": "train", "steps": 1e6} for _ in range(args.jobs)]}
        ).encode()
        request = urllib.request.Request(service.url + "/v1/jobs/batch", data=body)
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=60) as r:
            ids = json.loads(r.read())["ids"]
        samples: list[tuple[float, float]] = []
        stop = threading.Event()

        def client(k: int) -> None:
            i = k
            while not stop.is_set():
                url = f"{service.url}/v1/jobs/{ids[i % len(ids)]}"
                t0 = time.monotonic()
                with urllib.request.urlopen(url, timeout=60) as r:
                    r.read()
                samples.append((t0, time.monotonic()))
                i += 2

        threads = [threading.Thread(target=client, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        time.sleep(args.rounds * args.round_s)
        stop.set()
        for t in threads:
            t.join()
        service.stop()
    during, between = [], []
    for t0, t1 in samples:
        overlaps = any(t0 < b1 and t1 > b0 for b0, b1 in windows)
        (during if overlaps else between).append(t1 - t0)
    result = {
        "jobs": args.jobs,
        "gpus": 64,
        "launch_ms": args.launch_ms,
        "boundaries": percentiles([b1 - b0 for b0, b1 in windows]),
        "during_boundaries": percentiles(during),
        "between_boundaries": percentiles(between),
    }
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
