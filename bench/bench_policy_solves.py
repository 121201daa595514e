"""The policy solves of a round run, alone: CPU seconds and a hash of every allocation.

Runs the run of ``bench/bench_rounds.py`` once (Gavel 36:36:36, 3.0 jobs/h, jobs
4000-5000, ``max_min_fairness_perf``, strided; or ``--openb``), records every PolicyInput
the mechanism hands the policy, then solves them all again ``--repeat`` times back to
back (CPU seconds of the policy alone, without the round loop around it, so the number
moves less with the machine's load) and prints one JSON object:

- ``solves``: how many; ``solve_cpu_s``: each repeat's CPU seconds, ``median``;
- ``allocations``: a hash of every allocation (matrix, pair matrix, objective, notes) in
  order: equal hashes for two commits mean the same allocations, bit for bit;
- ``avg_jct_h`` (whole runs only).

    PYTHONPATH=src python bench/bench_policy_solves.py [--repeat 3]
    PYTHONPATH=/tmp/before/src python bench/bench_policy_solves.py   # same hash?
    PYTHONPATH=src python bench/bench_policy_solves.py --openb --rate 860 \\
        --placement fgd --max-rounds 300
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import time
from typing import Any

import numpy as np

from gpumosaic.mechanisms.rounds import allocation as book_module
from gpumosaic.policies.base import Allocation, PolicyInput


class RecordingPolicy:
    """Wraps the run's policy: keeps every input and hashes every allocation."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.inputs: list[PolicyInput] = []
        self.hash = hashlib.sha256()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.policy, name)

    def allocate(self, inp: PolicyInput) -> Allocation:
        allocation = self.policy.allocate(inp)
        self.inputs.append(inp)
        update_hash(self.hash, allocation)
        return allocation


def update_hash(h: Any, a: Allocation) -> None:
    h.update(np.ascontiguousarray(a.matrix).tobytes())
    if a.pair_matrix is not None:
        h.update(np.ascontiguousarray(a.pair_matrix).tobytes())
    h.update(repr((a.objective, a.notes)).encode())


def record_run(args: argparse.Namespace) -> tuple[RecordingPolicy, float]:
    recorders: list[RecordingPolicy] = []
    original_init = book_module.AllocationBook.__init__

    def init(self: Any, policy: Any, *rest: Any, **kw: Any) -> None:
        recorders.append(RecordingPolicy(policy))
        original_init(self, recorders[-1], *rest, **kw)

    book_module.AllocationBook.__init__ = init  # type: ignore[method-assign]
    try:
        jct = run_openb(args) if args.openb else run_gavel(args)
    finally:
        book_module.AllocationBook.__init__ = original_init  # type: ignore[method-assign]
    return recorders[0], jct


def run_gavel(args: argparse.Namespace) -> float:
    from gpumosaic.experiments.reproductions.gavel import CONTINUOUS_CLUSTER, repro_figures
    from gpumosaic.model.cluster import ClusterSpec
    from gpumosaic.run.rounds import round_simulator
    from gpumosaic.workloads.gavel_stream import gavel_stream_workload

    start, _, end = args.window.partition("-")
    workload = gavel_stream_workload(args.rate, (int(start), int(end)), args.seed)
    cluster = ClusterSpec.from_counts(CONTINUOUS_CLUSTER, gpus_per_node=1)
    result = round_simulator(cluster, workload, args.policy, args.placement, args.seed).run()
    return float(repro_figures(result)[0])


def run_openb(args: argparse.Namespace) -> float:
    from gpumosaic.experiments.reproductions.gavel import repro_figures
    from gpumosaic.experiments.reproductions.gavel_openb import openb_workload
    from gpumosaic.run.rounds import round_simulator
    from gpumosaic.traces.openb import load_openb_nodes

    class _Stop(Exception):
        pass

    rounds = [0]

    def count(_plan: object) -> None:
        rounds[0] += 1
        if args.max_rounds and rounds[0] >= args.max_rounds:
            raise _Stop

    start, _, end = args.window.partition("-")
    workload = openb_workload(args.rate, (int(start), int(end)), args.seed)
    sim = round_simulator(
        load_openb_nodes("openb:gpu"), workload, args.policy, args.placement, args.seed,
        on_plan=count,
    )  # fmt: skip
    try:
        return float(repro_figures(sim.run())[0])
    except _Stop:
        return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--window", default="4000-5000")
    parser.add_argument("--rate", type=float, default=3.0)
    parser.add_argument("--policy", default="max_min_fairness_perf")
    parser.add_argument("--placement", default="strided")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--openb", action="store_true", help="the Alibaba-scale run")
    parser.add_argument("--max-rounds", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    recorder, jct = record_run(args)
    policy, inputs = recorder.policy, recorder.inputs
    cpu: list[float] = []
    for _ in range(args.repeat):
        h = hashlib.sha256()
        t0 = time.process_time()
        allocations = [policy.allocate(inp) for inp in inputs]
        cpu.append(time.process_time() - t0)
        for a in allocations:
            update_hash(h, a)
        if h.hexdigest() != recorder.hash.hexdigest():
            raise SystemExit("a repeat gave other allocations than the run")
    print(
        json.dumps(
            {
                "policy": args.policy,
                "run": "openb" if args.openb else "gavel",
                "avg_jct_h": round(jct, 3),
                "solves": len(inputs),
                "mean_jobs": round(float(np.mean([i.num_jobs for i in inputs] or [0])), 1),
                "solve_cpu_s": [round(c, 3) for c in cpu],
                "median": round(statistics.median(cpu), 3) if cpu else None,
                "allocations": recorder.hash.hexdigest()[:16],
            }
        )
    )


if __name__ == "__main__":
    main()
