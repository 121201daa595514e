"""Benchmark: 10,000 generated jobs on a 1,000-GPU cluster with FGD placement.

Run on demand (not part of the tests):
    .venv/bin/python bench/bench_simulate.py [--jobs 10000] [--gpus 1000] [--rate 100]
Prints wall time, simulated events and events per second. The whole-process time is
what ``/usr/bin/time -v .venv/bin/python bench/bench_simulate.py`` reports.
"""

from __future__ import annotations

import argparse
import time

from gpumosaic.results.summary import summarize
from gpumosaic.run.build import build_parts, run_parts
from gpumosaic.run.description import RunDescription
from gpumosaic.workloads.spec import parse_cluster, parse_workload


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--gpus", type=int, default=1_000)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--rate", type=float, default=100.0, help="jobs per hour")
    parser.add_argument("--placement", default="fgd")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    cluster = parse_cluster(f"v100:{args.gpus}", gpus_per_node=args.gpus_per_node)
    spec = f"gavel:jobs={args.jobs},rate={args.rate},milli=spatial,multigpu=on"
    workload = parse_workload(spec, args.seed).workload
    wall = time.perf_counter()
    description = RunDescription(
        cluster=f"v100:{args.gpus}", gpus_per_node=args.gpus_per_node, workload=spec,
        policy="fifo", placement=args.placement, seed=args.seed,
    )  # fmt: skip
    # Through the road, with the cluster and workload already parsed (not timed).
    parts = build_parts(description, cluster=cluster, workload=workload)
    result = run_parts(parts).result
    elapsed = time.perf_counter() - wall
    summary = summarize(result)
    print(f"workload         {spec} on v100:{args.gpus} ({len(cluster.nodes)} nodes)")
    print(f"placement        {args.placement}")
    print(f"jobs completed   {summary.completed} / {summary.jobs}")
    print(
        f"avg JCT          {summary.avg_jct_s / 3600:.2f} h, utilization {summary.utilization:.1%}"
    )
    print(f"events           {result.stats.events}")
    print(f"wall time        {elapsed:.2f} s")
    print(f"events per s     {result.stats.events / elapsed:,.0f}")


if __name__ == "__main__":
    main()
