"""Benchmark of the round mechanism on Gavel's continuous experiment.

3.0 jobs/hr, 36:36:36 (one GPU per server), jobs 4000-5000 measured, Gavel's own job
stream, ``max_min_fairness_perf``, strided placement. Prints wall and CPU seconds, and
how they split between policy solves, placement (leases) and the rest of the mechanism.
Gavel itself: 133 s of CPU for this run (reference/gavel.md).

    .venv/bin/python bench/bench_rounds.py [--window 4000-5000] [--rate 3.0]
        [--policy max_min_fairness_perf] [--placement strided] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import time

from gpumosaic.experiments.reproductions.gavel import (
    CONTINUOUS_CLUSTER,
    continuous_workload,
    summarize,
)
from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.sim.rounds import run_rounds
from gpumosaic.workloads.gavel_stream import gavel_stream_workload


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--window", default="4000-5000")
    parser.add_argument("--rate", type=float, default=3.0)
    parser.add_argument("--policy", default="max_min_fairness_perf")
    parser.add_argument("--placement", default="strided")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs-source", default="gavel", choices=("gavel", "gpumosaic"))
    args = parser.parse_args()
    start, _, end = args.window.partition("-")
    window = (int(start), int(end))
    if args.jobs_source == "gavel":
        workload = gavel_stream_workload(args.rate, window, args.seed)
    else:
        workload = continuous_workload(args.rate, args.seed, "gpumosaic")
    cluster = ClusterSpec.from_counts(CONTINUOUS_CLUSTER, gpus_per_node=1)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    result = run_rounds(cluster, workload, args.policy, args.placement, seed=args.seed)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    jct_h, _makespan_h, completed = summarize(result)
    extra = dict(result.extra)
    stats = result.stats
    print(
        json.dumps(
            {
                "policy": args.policy,
                "rate": args.rate,
                "window": args.window,
                "avg_jct_h": round(jct_h, 3),
                "completed": completed,
                "wall_s": round(wall, 2),
                "cpu_s": round(cpu, 2),
                "rounds": stats.rounds,
                "policy_solves": stats.policy_solves,
                "policy_solve_s": round(stats.policy_solve_s, 2),
                "placement_s": round(extra["placement_s"], 2),
                "other_s": round(wall - stats.policy_solve_s - extra["placement_s"], 2),
                "us_per_round_without_solves": round(
                    1e6 * (wall - stats.policy_solve_s) / max(stats.rounds, 1), 1
                ),
                "ms_per_solve": round(1e3 * stats.policy_solve_s / max(stats.policy_solves, 1), 2),
            }
        )
    )


if __name__ == "__main__":
    main()
