"""Round-decision benchmark of the live round service: 1,000 queued jobs on 256 GPUs.

The service's own driver (``live.rounds.driver.RoundDriver``) around the shared
``RoundDecider``, its SQLite store (on disk, WAL) and lease table, with the in-process
executor on a fake clock (no processes: what is timed is the service's decision and
bookkeeping). A boundary = close the round (measured steps -> decider.report, rate EMA),
admit, ``decider.plan``, apply (extend / stop / launch leases, store writes). Policy
solves are timed apart: they happen only when jobs come or go (and at most once per
``--resolve-interval-s``).

Cluster: 32 nodes x 8 GPUs (16 V100, 8 P100, 8 K80 nodes). Jobs (seeded): Gavel job
types at scale 1/2/4, 15 % of them at 500 milli, steps drawn so they outlast the run.

    PYTHONPATH=src python bench/bench_live_rounds.py [--jobs 1000] [--rounds 30]
        [--policy max_min_fairness_perf] [--placement fgd] [--resolve-interval-s 1920]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from gpumosaic.mechanisms.rounds.live.driver import RoundDriver
from gpumosaic.run.serve import ServeDescription, build_decider
from gpumosaic.runtime.cluster import RayNode, discover
from gpumosaic.runtime.executors.contract import InProcessExecutor
from gpumosaic.runtime.jobs.submission import JobSubmission
from gpumosaic.runtime.leases import LeaseTable
from gpumosaic.runtime.state.store import Store
from gpumosaic.runtime.supervisor.config import DriverConfig
from gpumosaic.workloads.throughputs import GavelThroughputTable


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--policy", default="max_min_fairness_perf")
    parser.add_argument("--placement", default="fgd")
    parser.add_argument("--resolve-interval-s", type=float, default=1920.0)
    parser.add_argument("--round-s", type=float, default=360.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    nodes = [
        RayNode(f"node-{i:02d}", f"10.0.0.{i}", ((model, 8),))
        for i, model in enumerate(["V100"] * 16 + ["P100"] * 8 + ["K80"] * 8)
    ]
    live = discover(nodes, None)
    table_rates = GavelThroughputTable.load()
    rng = np.random.default_rng(args.seed)
    clock = [1_000.0]

    def now() -> float:
        return clock[0]

    def rate_of(job_id: int, model: str) -> float:  # "measured" speed of the fake jobs
        return 1.0 + (job_id % 7) * (2.0 if model == "V100" else 1.0)

    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "state.db")
        table = LeaseTable(store, now)
        executor = InProcessExecutor(table, now, rate_of)
        config = ServeDescription(
            policy=args.policy,
            placement=args.placement,
            round_s=args.round_s,
            resolve_interval_s=args.resolve_interval_s,
            seed=args.seed,
        )
        decider, priors = build_decider(config, live)
        driver = RoundDriver(
            store,
            table,
            executor,
            decider,
            live,
            priors,
            DriverConfig(round_s=args.round_s, data_dir=tmp),
            clock=now,
        )
        plan_s: list[float] = []
        inner_plan = decider.plan

        def timed_plan(t: float):  # type: ignore[no-untyped-def]
            t0 = time.perf_counter()
            out = inner_plan(t)
            plan_s.append(time.perf_counter() - t0)
            return out

        decider.plan = timed_plan  # type: ignore[method-assign]
        job_types = [jt for jt in table_rates.job_types if table_rates.has(jt, 4, "v100")]
        for _job in range(args.jobs):
            gpus = int(rng.choice([1, 2, 4], p=[0.8, 0.15, 0.05]))
            milli = 500 if gpus == 1 and rng.random() < 0.15 else 1000
            store.add_job(
                JobSubmission(
                    command="train",
                    steps=float(rng.integers(10**6, 10**7)),
                    gpus=gpus,
                    gpu_milli=milli,
                    job_type=str(rng.choice(job_types)),
                ),
                now(),
                2,
            )
        boundary_s, boundary_cpu, solve_s, running = [], [], [], []
        for _round in range(args.rounds):
            solves_before, solve_before = decider.book.solves, decider.book.solve_s
            t0, c0 = time.perf_counter(), time.thread_time()
            plan = driver.boundary(now())
            wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
            solved = decider.book.solve_s - solve_before
            boundary_s.append(wall - solved)
            boundary_cpu.append(cpu - solved)
            if decider.book.solves > solves_before:
                solve_s.append(solved)
            running.append(plan.jobs_running)
            for _ in range(4):  # the round: the fake jobs step, park at the grant's end
                clock[0] += args.round_s / 4
                driver.tick(now())
        b = np.array(boundary_s) * 1e3
        c = np.array(boundary_cpu) * 1e3
        p = (np.array(plan_s) - 0) * 1e3
        print(
            json.dumps(
                {
                    "jobs": args.jobs,
                    "gpus": live.spec.num_gpus,
                    "rounds": args.rounds,
                    "policy": args.policy,
                    "placement": args.placement,
                    "jobs_running_per_round_mean": float(np.mean(running)),
                    "decision_ms_median": round(float(np.median(b)), 2),
                    "decision_ms_p99": round(float(np.percentile(b, 99)), 2),
                    "decision_ms_max": round(float(b.max()), 2),
                    "first_round_ms": round(float(b[0]), 2),
                    "decision_cpu_ms_median": round(float(np.median(c)), 2),
                    "decision_cpu_ms_p99": round(float(np.percentile(c, 99)), 2),
                    "load_average_1min": round(os.getloadavg()[0], 1),
                    "of_which_decider_plan_ms_median": round(float(np.median(p)), 2),
                    "policy_solves": len(solve_s),
                    "policy_solve_ms": [round(s * 1e3, 1) for s in solve_s],
                    "launches": driver.process_counters.launches,
                    "extensions": driver.counters.extensions,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
