"""Service overhead of ``gpumosaic serve`` on local Ray: from a lease's end to the next
lease's process running, and the memory of the service process.

One logical V100, ``--jobs`` short jobs queued at once (each ~0.2 s of 10 ms steps via
``gpumosaic.lease``), long rounds: each job runs alone, and when it exits the round ends
early and the next job is launched. Per hand-over, from the store:

- decide: the old lease's end (its exit noticed) -> the new lease launched (a boundary);
- start: launched -> the new process's first call to the lease API (Ray actor start,
  the subprocess and its Python start-up, the HTTP call);
- total = decide + start.

Memory: RSS of this process (the service: API, driver, store, Ray driver) and the sum
over Ray's own processes (GCS, raylet, workers) on this machine.

    PYTHONPATH=src RAY_AUTH_MODE=disabled python bench/bench_live_overhead.py [--jobs 12]
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

JOB = """
import time
from gpumosaic.lease import Lease
lease = Lease.from_env()
state = lease.load() or {"step": 0}
for step in lease.steps(start=state["step"]):
    time.sleep(0.01)
    state["step"] = step + 1
lease.save(state)
"""


def rss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return 0.0


def ray_session_rss_mib(ray: object) -> float:
    """RSS of this Ray instance's processes: those naming its session, and their children
    (workers). psutil comes with Ray."""
    try:
        import psutil
    except ImportError:
        return float("nan")
    session = ray._private.worker.global_worker.node.session_name  # type: ignore[attr-defined]
    pids: set[int] = set()
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if session in " ".join(proc.info["cmdline"] or []):
            pids.add(proc.info["pid"])
            pids.update(c.pid for c in proc.children(recursive=True))
    pids.discard(os.getpid())
    return sum(rss_mib(pid) for pid in pids)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=12)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    from gpumosaic.run.serve import ServeDescription, Service, connect_ray
    from gpumosaic.runtime.api.client import ServiceClient

    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "job.py"
        script.write_text(JOB)
        config = ServeDescription(
            cluster="v100:1", round_s=60.0, port=0, state=f"{tmp}/state.db", grace_s=5.0
        )
        t0 = time.perf_counter()
        live = connect_ray(config)
        ray_start_s = time.perf_counter() - t0
        service = Service(config, live)
        service.start()
        client = ServiceClient(service.url)
        for i in range(args.jobs):
            client.submit(
                {"command": f"{sys.executable} {script}", "steps": args.steps, "name": f"j{i}"}
            )
        give_up = time.monotonic() + 60 + 10 * args.jobs
        while not all(j["state"] == "done" for j in client.jobs()):
            if time.monotonic() > give_up:
                raise SystemExit("jobs did not finish in time")
            time.sleep(0.2)
        leases = sorted(service.store.leases(), key=lambda lease: lease.started_at)
        service_rss = rss_mib(os.getpid())
        ray_rss = ray_session_rss_mib(ray)
        service.stop()
        ray.shutdown()
    decide, start, total = [], [], []
    for prev, nxt in itertools.pairwise(leases):
        if prev.ended_at is None or nxt.running_at is None:
            continue
        decide.append(nxt.started_at - prev.ended_at)
        start.append(nxt.running_at - nxt.started_at)
        total.append(nxt.running_at - prev.ended_at)

    def stats(xs: list[float]) -> dict[str, float]:
        a = np.array(xs)
        return {
            "median_s": round(float(np.median(a)), 3),
            "p99_s": round(float(np.percentile(a, 99)), 3),
        }

    print(
        json.dumps(
            {
                "handovers": len(total),
                "lease_end_to_next_process_running": stats(total),
                "of_which_decision": stats(decide),
                "of_which_ray_actor_and_process_start": stats(start),
                "service_rss_mib": round(service_rss, 1),
                "ray_processes_rss_mib": round(ray_rss, 1),
                "ray_init_s": round(ray_start_s, 2),
                "load_average_1min": round(os.getloadavg()[0], 1),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    main()
