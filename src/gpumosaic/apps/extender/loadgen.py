"""A bounded load on a standalone extender: ``clients`` threads, each looping filter ->
prioritize -> bind -> release (DELETE /pods/...) on its own pods for ``duration_s``.

Used by the test suite (a few seconds) and bench/bench_extender.py (60 s). Errors are
transport failures and non-200 answers; a bind refused because another client took the
room first is a correct answer and counted apart (``rejected``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import httpx
import numpy as np

from gpumosaic.apps.extender.vocabulary import pod_object
from gpumosaic.model.job import JobSpec

SHAPES = ((1, 250), (1, 500), (1, 1000), (2, 1000), (0, 0))  # (num_gpu, milli) cycled


@dataclass(frozen=True, slots=True)
class LoadResult:
    cycles: int  # filter + prioritize + bind (+ release) rounds completed
    errors: int
    rejected: int
    duration_s: float
    p50_ms: float
    p99_ms: float

    @property
    def throughput(self) -> float:
        """Scheduling cycles per second (3 verbs + a release each)."""
        return self.cycles / self.duration_s if self.duration_s else 0.0


def run_load(url: str, names: list[str], clients: int = 8, duration_s: float = 2.0) -> LoadResult:
    stop = time.monotonic() + duration_s
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors = [0] * clients
    rejected = [0] * clients

    def client_loop(k: int) -> None:
        with httpx.Client(base_url=url, timeout=30.0) as http:
            i = 0
            while time.monotonic() < stop:
                n, milli = SHAPES[(i + k) % len(SHAPES)]
                job = JobSpec(
                    id=i, arrival_s=0, job_type="load", num_gpu=n, gpu_milli=milli or 1000,
                    work=0, cpu_milli=1000, memory_mib=1024,
                )  # fmt: skip
                name = f"load-{k}-{i}"
                pod = pod_object(job, name, "load", f"uid-{k}-{i}")
                body = {"Pod": pod, "Nodes": None, "NodeNames": names}
                i += 1
                try:
                    start = time.perf_counter()
                    r = http.post("/filter", json=body)
                    passed = r.json().get("NodeNames") or [] if r.status_code == 200 else None
                    if passed is None:
                        errors[k] += 1
                        continue
                    if not passed:
                        rejected[k] += 1
                        continue
                    body["NodeNames"] = passed
                    r = http.post("/prioritize", json=body)
                    if r.status_code != 200:
                        errors[k] += 1
                        continue
                    host = max(r.json(), key=lambda s: s["Score"])["Host"]
                    meta = pod["metadata"]
                    binding = {"PodName": name, "PodNamespace": "load", "PodUID": meta["uid"],
                               "Node": host}  # fmt: skip
                    r = http.post("/bind", json=binding)
                    latencies[k].append(time.perf_counter() - start)
                    if r.status_code != 200:
                        errors[k] += 1
                    elif r.json()["Error"]:
                        rejected[k] += 1
                    elif http.delete(f"/pods/load/{name}").status_code != 200:
                        errors[k] += 1
                except httpx.HTTPError:
                    errors[k] += 1

    began = time.perf_counter()
    threads = [threading.Thread(target=client_loop, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(duration_s + 60.0)
    elapsed = time.perf_counter() - began
    flat = np.asarray([x for per in latencies for x in per]) * 1000.0
    return LoadResult(
        cycles=len(flat),
        errors=sum(errors),
        rejected=sum(rejected),
        duration_s=elapsed,
        p50_ms=float(np.percentile(flat, 50)) if len(flat) else 0.0,
        p99_ms=float(np.percentile(flat, 99)) if len(flat) else 0.0,
    )
