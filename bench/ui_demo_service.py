"""A round service without Ray for the ``/ui`` benchmark and for looking at the page:
the service's own store, driver, decider and HTTP app, with the in-process executor
(virtual jobs stepping at a fixed rate), on a cluster of Ray nodes described in code.

    PYTHONPATH=src python bench/ui_demo_service.py [--jobs 40] [--port 8470]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from gpumosaic.run.serve import ServeDescription, Service
from gpumosaic.runtime.cluster import RayNode, discover
from gpumosaic.runtime.executors.contract import InProcessExecutor
from gpumosaic.runtime.jobs.submission import JobSubmission
from gpumosaic.runtime.leases import LeaseTable
from gpumosaic.workloads.throughputs import GavelThroughputTable


def rate_of(job_id: int, model: str) -> float:  # the virtual jobs' own speed
    return 20.0 + (job_id % 7) * (8.0 if model == "V100" else 3.0)


def demo_service(
    state_dir: Path,
    nodes: list[tuple[str, int]],
    *,
    port: int = 0,
    round_s: float = 20.0,
    placement: str = "fgd",
    token: str = "",
) -> Service:
    ray_nodes = [
        RayNode(f"node-{i:02d}", f"10.0.0.{i}", ((m, n),)) for i, (m, n) in enumerate(nodes)
    ]
    live = discover(ray_nodes, None)
    config = ServeDescription(
        state=str(state_dir / "state.db"),
        port=port,
        round_s=round_s,
        placement=placement,
        token=token,
        grace_s=0.5,
    )

    def executor(table: LeaseTable) -> InProcessExecutor:
        return InProcessExecutor(table, time.time, rate_of)

    return Service(config, live, executor_factory=executor)


def submit_jobs(
    service: Service, n: int, seed: int = 0, steps: tuple[int, int] = (2000, 20000)
) -> None:
    rng = np.random.default_rng(seed)
    table = GavelThroughputTable.load()
    types = [jt for jt in table.job_types if table.has(jt, 4, "v100")]
    for i in range(n):
        gpus = int(rng.choice([1, 2, 4], p=[0.8, 0.15, 0.05]))
        milli = int(rng.choice([250, 500])) if gpus == 1 and rng.random() < 0.3 else 1000
        service.store.add_job(
            JobSubmission(
                command="train",
                name=f"{str(rng.choice(types)).split(' ')[0].lower()}-{i}",
                steps=float(rng.integers(*steps)),
                gpus=gpus,
                gpu_milli=milli,
                job_type=str(rng.choice(types)),
            ),
            service.clock(),
            2,
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--port", type=int, default=8470)
    parser.add_argument("--round-s", type=float, default=20.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        service = demo_service(
            Path(tmp), [("V100", 4), ("V100", 4), ("P100", 4), ("K80", 4)],
            port=args.port, round_s=args.round_s,
        )  # fmt: skip
        service.start()
        submit_jobs(service, args.jobs)
        print(f"{service.url}/ui", flush=True)
        try:
            service.wait()
        finally:
            service.stop()


if __name__ == "__main__":
    main()
