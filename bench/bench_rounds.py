"""Benchmark of the round mechanism on Gavel's continuous experiment.

3.0 jobs/hr, 36:36:36 (one GPU per server), jobs 4000-5000 measured, Gavel's own job
stream, ``max_min_fairness_perf``, strided placement. Prints wall and CPU seconds, and
how they split between policy solves, placement (leases) and the rest of the mechanism.
Gavel itself: 133 s of CPU for this run (reference/gavel.md).

    .venv/bin/python bench/bench_rounds.py [--window 4000-5000] [--rate 3.0]
        [--policy max_min_fairness_perf] [--placement strided] [--seed 0]

``--openb``: the Alibaba-scale run instead (openb:gpu, 1,213 nodes; Gavel's generator with
the spatial milli mix and borrowed rates, the workload of ``gpumosaic simulate --cluster
openb:gpu --workload gavel:rate=R,window=A-B,milli=spatial``), e.g. ``--openb --rate 860
--placement fgd``. ``--max-rounds N`` stops after N rounds (a profile of the steady state
without the whole run; the JCT is then not reported).
"""

from __future__ import annotations

import argparse
import json
import time
from inspect import signature

from gpumosaic.experiments.reproductions.gavel import (
    CONTINUOUS_CLUSTER,
    continuous_workload,
    repro_figures,
)
from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.run.rounds import round_simulator
from gpumosaic.workloads.gavel_stream import gavel_stream_workload


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--window", default="4000-5000")
    parser.add_argument("--rate", type=float, default=3.0)
    parser.add_argument("--policy", default="max_min_fairness_perf")
    parser.add_argument("--placement", default="strided")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs-source", default="gavel", choices=("gavel", "gpumosaic"))
    parser.add_argument("--openb", action="store_true", help="the Alibaba-scale run")
    parser.add_argument("--max-rounds", type=int, default=0)
    args = parser.parse_args()
    start, _, end = args.window.partition("-")
    window = (int(start), int(end))
    if args.openb:
        run_openb_bench(args, window)
        return
    if args.jobs_source == "gavel":
        workload = gavel_stream_workload(args.rate, window, args.seed)
    else:
        workload = continuous_workload(args.rate, args.seed, "gpumosaic")
    cluster = ClusterSpec.from_counts(CONTINUOUS_CLUSTER, gpus_per_node=1)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    result = round_simulator(cluster, workload, args.policy, args.placement, args.seed).run()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    jct_h, _makespan_h, completed = repro_figures(result)
    assert result.leases is not None
    placement_s = result.leases.placement_s
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
                "placement_s": round(placement_s, 2),
                "other_s": round(wall - stats.policy_solve_s - placement_s, 2),
                "us_per_round_without_solves": round(
                    1e6 * (wall - stats.policy_solve_s) / max(stats.rounds, 1), 1
                ),
                "ms_per_solve": round(1e3 * stats.policy_solve_s / max(stats.policy_solves, 1), 2),
            }
        )
    )


def run_openb_bench(args: argparse.Namespace, window: tuple[int, int]) -> None:
    from gpumosaic.experiments.reproductions.gavel_openb import openb_workload
    from gpumosaic.mechanisms.rounds.sim import RoundSimulator
    from gpumosaic.traces.openb import load_openb_nodes

    class _Stop(Exception):
        pass

    rounds = [0]

    def count(_plan: object) -> None:
        rounds[0] += 1
        if args.max_rounds and rounds[0] >= args.max_rounds:
            raise _Stop

    cluster = load_openb_nodes("openb:gpu")
    workload = openb_workload(args.rate, window, args.seed)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    # As `gpumosaic simulate`, plans without values: the hook only counts rounds (a
    # commit from before the `describe` switch builds them, and pays for it).
    quiet = {"describe": False} if "describe" in signature(RoundSimulator).parameters else {}
    sim = round_simulator(
        cluster, workload, args.policy, args.placement, args.seed, on_plan=count, **quiet
    )
    jct_h = float("nan")
    try:
        result = sim.run()
        jct_h = repro_figures(result)[0]
    except _Stop:
        pass
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    book, leases = sim.decider.book, sim.decider.leases
    print(
        json.dumps(
            {
                "cluster": "openb:gpu",
                "placement": args.placement,
                "rate": args.rate,
                "window": args.window,
                "avg_jct_h": round(jct_h, 3),
                "rounds": rounds[0],
                "wall_s": round(wall, 2),
                "cpu_s": round(cpu, 2),
                "policy_solves": book.solves,
                "policy_solve_s": round(book.solve_s, 2),
                "placement_s": round(leases.seconds, 2),
                "placements": leases.placements,
                "lease_extensions": leases.extensions,
                "placement_failures": leases.failures,
                "active_jobs_at_end": len(sim.jobs.active_rows),
            }
        )
    )


if __name__ == "__main__":
    main()
