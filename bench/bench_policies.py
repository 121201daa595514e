"""Policy solve time vs number of jobs (Gavel's setting: N/4 GPUs of each of v100/p100/k80).

    .venv/bin/python bench/bench_policies.py                        # default policies/sizes
    .venv/bin/python bench/bench_policies.py --sizes 32,128,256,512,1024,2048 \
        --policies max_min_fairness_perf,max_min_fairness_packed --repeats 3
    .venv/bin/python bench/bench_policies.py --backend cvxpy:CLARABEL   # cvxpy compile cost

Times one ``allocate`` call (median of ``--repeats``), after building the input; the
candidate-pair build (``build_packed_pairs``, top-k) is timed on its own line. A policy is
skipped at larger sizes once one call exceeds ``--budget`` seconds.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from gpumosaic.policies.packing_pairs import build_packed_pairs
from gpumosaic.policies.registry import POLICY_NAMES, build_policy
from gpumosaic.policies.synthetic import gavel_policy_input
from gpumosaic.workloads.throughputs import GavelThroughputTable

DEFAULT_POLICIES = (
    "max_min_fairness",
    "max_min_fairness_perf",
    "max_min_fairness_packed",
    "max_min_fairness_water_filling_perf",
    "finish_time_fairness_perf",
    "finish_time_fairness_packed",
    "max_sum_throughput_normalized_by_cost_perf_SLOs",
    "min_total_duration_perf",
    "min_total_duration_packed",
    "fifo_perf",
    "gandiva",
    "tiresias",
)
LP_POLICIES_WITH_BACKEND = {
    name
    for name in POLICY_NAMES
    if name.startswith(("max_min", "finish_time", "max_sum", "min_total"))
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="32,128,256,512,1024")
    parser.add_argument("--policies", default=",".join(DEFAULT_POLICIES))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--top-k", type=int, default=4)
    parser.add_argument("--backend", default=None, help="LP back end (clarabel, highs, cvxpy:NAME)")
    parser.add_argument("--multi-gpu", action="store_true", help="scale factors 1/2/4/8")
    parser.add_argument("--budget", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    policies = [p for p in args.policies.split(",") if p]
    table = GavelThroughputTable.load()

    results: dict[str, dict[int, float]] = {p: {} for p in ["(build pairs, top-k)", *policies]}
    over_budget: set[str] = set()
    for n in sizes:
        inp = gavel_policy_input(
            n, np.random.default_rng(args.seed), table=table, multi_gpu=args.multi_gpu
        )
        keys = list(zip(inp.job_types, (int(s) for s in inp.scale_factors), strict=True))
        start = time.perf_counter()
        pairs = build_packed_pairs(keys, table, inp.gpu_types, args.top_k)
        results["(build pairs, top-k)"][n] = time.perf_counter() - start
        inp = _with_pairs(inp, pairs)
        for name in policies:
            if name in over_budget:
                continue
            options = (
                {"backend": args.backend}
                if args.backend and name in LP_POLICIES_WITH_BACKEND
                else {}
            )
            times = []
            for _ in range(args.repeats):
                policy = build_policy(name, **options)
                start = time.perf_counter()
                policy.allocate(inp)
                times.append(time.perf_counter() - start)
                if times[-1] > args.budget:
                    break
            results[name][n] = statistics.median(times)
            if max(times) > args.budget:
                over_budget.add(name)
        print(f"n={n}: {len(pairs.pairs)} candidate pairs", flush=True)

    width = max(len(p) for p in results)
    header = f"{'policy (seconds per solve)':<{width}} " + " ".join(f"{n:>8d}" for n in sizes)
    print(header)
    print("-" * len(header))
    for name, by_size in results.items():
        cells = " ".join(f"{by_size[n]:8.3f}" if n in by_size else f"{'-':>8}" for n in sizes)
        print(f"{name:<{width}} {cells}")


def _with_pairs(inp, pairs):  # type: ignore[no-untyped-def]
    from dataclasses import replace

    return replace(inp, packed=pairs)


if __name__ == "__main__":
    main()
