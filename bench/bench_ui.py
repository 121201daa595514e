"""What ``/ui`` costs the round service: server CPU per client and second, 1,000 jobs.

A round service (its store, driver, decider and HTTP app; the in-process executor, so
virtual jobs step and report without Ray) on 32 nodes x 8 GPUs of three models with
``--jobs`` jobs (about 250 running, the rest queued). The service process's CPU time
(``time.process_time``: every thread: API, round loop, feed) is measured over a window
with no page open, then with ``--clients`` pages open (``curl -N`` streaming
``/ui/stream`` in other processes, so the clients' own CPU is not counted). The
difference divided by clients and seconds is the update cost per client; the feed's own
build cost (read the store and decider, build the world, diff, encode; once per interval
whatever the clients) is reported apart.

    PYTHONPATH=src python bench/bench_ui.py [--jobs 1000] [--clients 1,10] [--window-s 30]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from ui_demo_service import demo_service, submit_jobs

NODES = [("V100", 8)] * 16 + [("P100", 8)] * 8 + [("K80", 8)] * 8


def cpu_over(seconds: float) -> float:
    c0, t0 = time.process_time(), time.monotonic()
    time.sleep(seconds)
    return (time.process_time() - c0) / (time.monotonic() - t0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--clients", default="1,10")
    parser.add_argument("--window-s", type=float, default=30.0)
    parser.add_argument("--round-s", type=float, default=600.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        service = demo_service(Path(tmp), NODES, round_s=args.round_s)
        service.start()
        # Steps enough that no job ends within the run: a steady state to measure.
        submit_jobs(service, args.jobs, steps=(10**6, 10**7))
        time.sleep(5.0)  # the first boundary: admissions, the first solve, ~250 launches
        from gpumosaic.mechanisms.rounds.ui import RoundsView  # the page's feed, measured apart
        from gpumosaic.runtime.ui.stream import Feed

        view = RoundsView(service)
        feed = Feed(view.world, interval_s=0.0)
        feed.refresh()
        builds = 10
        t0 = time.thread_time()
        for _ in range(builds):  # a refresh: build, diff, encode the patch
            feed.refresh()
        build_ms = (time.thread_time() - t0) / builds * 1e3
        t0 = time.thread_time()
        for _ in range(builds):  # as after a boundary: the decider's view of every job again
            view._slow_key = (None,)
            feed.refresh()
        decided_ms = (time.thread_time() - t0) / builds * 1e3
        t0 = time.thread_time()
        for _ in range(builds):  # as when the page opens: everything
            Feed(RoundsView(service).world, 0.0).refresh()
        full_ms = (time.thread_time() - t0) / builds * 1e3
        world_bytes = len(json.dumps(feed.world, separators=(",", ":")))
        idle = cpu_over(args.window_s)
        results = []
        for n in [int(c) for c in args.clients.split(",")]:
            curls = [
                subprocess.Popen(
                    ["curl", "-sN", f"{service.url}/ui/stream", "-o", os.devnull],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                for _ in range(n)
            ]
            time.sleep(3.0)  # each gets the world once; then patches
            busy = cpu_over(args.window_s)
            for c in curls:
                c.terminate()
                c.wait(10)
            time.sleep(1.0)
            results.append(
                {
                    "clients": n,
                    "service_cpu_ms_per_s": round(busy * 1e3, 2),
                    "ui_cpu_ms_per_client_per_s": round((busy - idle) * 1e3 / n, 2),
                }
            )
        counts: dict[str, int] = {}
        for job in service.store.jobs():
            counts[job.state] = counts.get(job.state, 0) + 1
        service.stop()
    print(
        json.dumps(
            {
                "jobs": args.jobs,
                "gpus": sum(n for _, n in NODES),
                "job_states": counts,
                "feed_refresh_cpu_ms": round(build_ms, 2),
                "feed_refresh_after_boundary_cpu_ms": round(decided_ms, 2),
                "feed_first_build_cpu_ms": round(full_ms, 2),
                "world_bytes": world_bytes,
                "service_cpu_ms_per_s_no_client": round(idle * 1e3, 2),
                "with_clients": results,
                "window_s": args.window_s,
                "load_average_1min": round(os.getloadavg()[0], 1),
                "cpus": os.cpu_count(),
                "machine": platform.processor() or platform.machine(),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
