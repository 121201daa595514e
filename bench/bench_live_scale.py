"""The live round service at Alibaba scale, without Ray: the openb cluster (1,213 nodes,
6,212 GPUs) with ``--jobs`` jobs in the system (2,000), the in-process executor (virtual
jobs stepping at a fixed rate), the service's own store, driver, decider and HTTP API on
a real uvicorn on 127.0.0.1.

Per round boundary (the round loop's thread, ``time.thread_time``): the CPU of the
decision (``decider.plan``, the policy solve included, and ``decider.solve`` when the
driver forces one), the CPU of the rest of the boundary (the bookkeeping: closing the
round, admission, applying the plan: leases, launches, store rows), and the wall time of
the store's writes (SQLite statements that change the state, the commit included).
Meanwhile a client in another process sends requests to the API (``GET
/v1/jobs?limit=50``, ``GET /v1/jobs/ID``, ``GET /healthz`` in turn, at most 20 a second)
until the boundaries are measured or ``--requests`` are sent, and reports their p50/p99
(a request unanswered within 30 s counts as 30 s).
Targets (issue 37): a boundary's decision < 1 s of CPU, API p99 < 50 ms.

    PYTHONPATH=src python bench/bench_live_scale.py [--jobs 2000] [--boundaries 3]
        [--round-s 30] [--requests 3000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from gpumosaic.mechanisms.rounds.live.driver import RoundDriver
from gpumosaic.run.serve import Service, ServiceConfig
from gpumosaic.runtime.cluster import RayNode, discover
from gpumosaic.runtime.executors.contract import InProcessExecutor
from gpumosaic.runtime.leases import LeaseTable
from gpumosaic.traces.openb import load_openb_nodes
from ui_demo_service import rate_of, submit_jobs

WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "COMMIT", "BEGIN")

CLIENT = """
import json, os, sys, time, httpx
url, n, stop = sys.argv[1], int(sys.argv[2]), sys.argv[3]
paths = ["/v1/jobs?limit=50", "/v1/jobs/1", "/healthz"]
took = []
with httpx.Client(base_url=url, timeout=30) as client:
    for i in range(n):
        if os.path.exists(stop):
            break
        t0 = time.perf_counter()
        try:
            client.get(paths[i % 3]).raise_for_status()
        except httpx.TimeoutException:
            pass  # counted at its full wait: the API did not answer within the timeout
        took.append(time.perf_counter() - t0)
        time.sleep(max(0.0, 0.05 - (time.perf_counter() - t0)))
print(json.dumps(took))
"""


class TimedDb:
    """The store's SQLite connection, timing the statements that write (wall seconds)."""

    def __init__(self, db: Any, spent: list[float]) -> None:
        self._db, self._spent = db, spent

    def _timed(self, method: str, sql: str, *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return getattr(self._db, method)(sql, *args)
        finally:
            if sql.lstrip()[:7].upper().startswith(WRITES):
                self._spent[0] += time.perf_counter() - t0

    def execute(self, sql: str, *args: Any) -> Any:
        return self._timed("execute", sql, *args)

    def executemany(self, sql: str, *args: Any) -> Any:
        return self._timed("executemany", sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--boundaries", type=int, default=3)
    parser.add_argument("--round-s", type=float, default=30.0)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--placement", default="fgd")
    args = parser.parse_args()
    spec = load_openb_nodes("openb:gpu")
    nodes = [
        RayNode(f"node-{i:04d}", f"10.{i // 250}.{i % 250}.1", ((n.gpu.name, n.num_gpus),))
        for i, n in enumerate(spec.nodes)
    ]
    live = discover(nodes, None)
    boundaries: list[dict[str, float]] = []
    decision = [0.0]
    writes = [0.0]
    inner_boundary = RoundDriver.boundary

    def timed_boundary(driver: RoundDriver, now: float) -> Any:
        decision[0], writes[0] = 0.0, 0.0
        t0, w0 = time.thread_time(), time.perf_counter()
        plan = inner_boundary(driver, now)
        cpu = time.thread_time() - t0
        boundaries.append(
            row := {
                "decision_cpu_s": round(decision[0], 3),
                "bookkeeping_cpu_s": round(cpu - decision[0], 3),
                "store_write_s": round(writes[0], 3),
                "wall_s": round(time.perf_counter() - w0, 3),
                "jobs_running": plan.jobs_running,
            }
        )
        print(json.dumps(row), file=sys.stderr, flush=True)  # progress
        return plan

    RoundDriver.boundary = timed_boundary  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as tmp:
        config = ServiceConfig(
            state=str(Path(tmp) / "state.db"),
            port=0,
            round_s=args.round_s,
            placement=args.placement,
            grace_s=0.5,
        )

        def executor(table: LeaseTable) -> InProcessExecutor:
            return InProcessExecutor(table, time.time, rate_of)

        service = Service(config, live, executor_factory=executor)
        for name in ("plan", "solve"):
            inner = getattr(service.decider, name)

            def timed(*a: Any, inner: Any = inner) -> Any:
                t0 = time.thread_time()
                try:
                    return inner(*a)
                finally:
                    decision[0] += time.thread_time() - t0

            setattr(service.decider, name, timed)
        service.store._db = TimedDb(service.store._db, writes)  # type: ignore[assignment]
        # Steps enough that no job ends within the run: a steady state to measure.
        submit_jobs(service, args.jobs, steps=(10**6, 10**7))
        service.start()
        stop = str(Path(tmp) / "stop")
        client = subprocess.Popen(
            [sys.executable, "-c", CLIENT, service.url, str(args.requests), stop],
            stdout=subprocess.PIPE,
            text=True,
        )
        give_up = time.monotonic() + args.boundaries * args.round_s * 10 + 600
        while len(boundaries) < args.boundaries and time.monotonic() < give_up:
            time.sleep(0.5)
        Path(stop).touch()
        out, _ = client.communicate(timeout=600)
        service.stop()
    took = np.array(json.loads(out)) * 1e3
    counted = boundaries[: args.boundaries]
    print(
        json.dumps(
            {
                "gpus": live.spec.num_gpus,
                "nodes": len(nodes),
                "jobs": args.jobs,
                "round_s": args.round_s,
                "placement": args.placement,
                "boundaries": counted,
                "api_requests": len(took),
                "api_ms_p50": round(float(np.percentile(took, 50)), 1),
                "api_ms_p99": round(float(np.percentile(took, 99)), 1),
                "api_ms_max": round(float(took.max()), 1),
                "load_average_1min": round(os.getloadavg()[0], 1),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
