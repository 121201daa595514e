"""Throughput estimation (Gavel section 5) against oracle rates, in the simulator.

The same static Gavel trace (every job at t = 0) runs three times per policy with
``--mechanism rounds``: ``oracle`` (the decider is told each job's rates from Gavel's
table), ``estimate`` (``simulate --estimate-throughputs``: the decider is told nothing,
profiles each job on every GPU model and estimates the rest from Gavel's reference jobs,
its own type left out) and ``estimate-1`` (profiled on one model only: the other two
rates stay the estimator's for the whole run, the estimator's effect on the schedule
alone). Jobs always run at the table's rates; a "measurement" is the true rate of a job
on the model it ran a round on.

Printed per (workload, policy, mode): average JCT and makespan, their relative
difference to ``oracle``, rounds given to profiling, estimates, and the median relative
error of the estimates a measurement later checked (``estimate``; for ``estimate-1`` the
error of the rates that stood, against the table).

    PYTHONPATH=src python bench/bench_estimation.py [--jobs 20,40]
        [--cluster v100:4,p100:4,k80:4] [--policies max_min_fairness_perf,...] [--seed 0]
        [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

from gpumosaic.mechanisms.rounds.decision import RoundConfig
from gpumosaic.mechanisms.rounds.estimation import EstimationConfig
from gpumosaic.results.summary import summarize
from gpumosaic.run.rounds import round_simulator
from gpumosaic.workloads.spec import parse_cluster, parse_workload

MODES: dict[str, EstimationConfig | None] = {
    "oracle": None,
    "estimate": EstimationConfig(),
    "estimate-1": EstimationConfig(profile_models=1),
}


def run_one(
    cluster_spec: str, workload_spec: str, policy: str, seed: int, mode: str
) -> dict[str, object]:
    cluster = parse_cluster(cluster_spec)
    workload = parse_workload(workload_spec, seed).workload
    config = MODES[mode]
    simulator = round_simulator(
        cluster, workload, policy, "fgd", seed, RoundConfig(), estimation=config
    )
    started = time.perf_counter()
    result = simulator.run()
    wall = time.perf_counter() - started
    summary = summarize(result)
    row: dict[str, object] = {
        "workload": workload_spec,
        "policy": policy,
        "mode": mode,
        "avg_jct_s": summary.avg_jct_s,
        "makespan_s": summary.makespan_s,
        "completed": summary.completed,
        "wall_s": round(wall, 3),
    }
    report = result.estimation
    if report is not None:
        row.update(report.to_json())
        row["standing_error_median"] = _standing_error(simulator)
    return row


def _standing_error(simulator: object) -> float | None:
    """Median relative error, against the true rates, of the entries that were still the
    estimator's at the end (never measured)."""
    decider = simulator.decider  # type: ignore[attr-defined]
    true = simulator._true_rates  # type: ignore[attr-defined]
    errors: list[float] = []
    for row in range(len(decider.jobs)):
        estimated = decider.estimation.estimated(row)
        if estimated is None or not estimated.any():
            continue
        got, want = decider.jobs.rates[row, estimated], true[row, estimated]
        errors += list(np.abs(got - want) / want)
    return float(np.median(errors)) if errors else None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", default="20,40", help="comma-separated job counts")
    parser.add_argument("--cluster", default="v100:4,p100:4,k80:4")
    parser.add_argument(
        "--policies", default="max_min_fairness_perf,finish_time_fairness_perf,fifo"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows: list[dict[str, object]] = []
    for jobs in (int(j) for j in args.jobs.split(",")):
        spec = f"gavel:jobs={jobs},rate=0"
        for policy in args.policies.split(","):
            oracle: dict[str, object] | None = None
            for mode in MODES:
                row = run_one(args.cluster, spec, policy, args.seed, mode)
                if oracle is None:
                    oracle = row
                for key in ("avg_jct_s", "makespan_s"):
                    base = float(oracle[key])  # type: ignore[arg-type]
                    row[f"{key.removesuffix('_s')}_rel_diff"] = float(row[key]) / base - 1  # type: ignore[arg-type]
                rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"cluster {args.cluster}, seed {args.seed}, static Gavel traces (rate=0)")
    header = (
        "| workload | policy | mode | avg JCT h | vs oracle | makespan h | vs oracle "
        "| profiling rounds | estimated / never measured | est. error median |"
    )
    print(header)
    print("|---" * 10 + "|")
    for r in rows:
        error = r.get("estimate_error_median")
        standing = r.get("standing_error_median")
        if r["mode"] == "oracle":
            err_text = "-"
        elif standing is not None:
            err_text = f"{_pct(error)} (standing {_pct(standing)})"
        else:
            err_text = _pct(error)
        print(
            f"| {r['workload']} | {r['policy']} | {r['mode']} "
            f"| {float(r['avg_jct_s']) / 3600:.2f} | {float(r['avg_jct_rel_diff']):+.1%} "  # type: ignore[arg-type]
            f"| {float(r['makespan_s']) / 3600:.2f} | {float(r['makespan_rel_diff']):+.1%} "  # type: ignore[arg-type]
            f"| {r.get('profiling_rounds', '-')} "
            f"| {r.get('estimated_entries', '-')} / {r.get('still_estimated', '-')} "
            f"| {err_text} |"
        )


def _pct(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{float(value):.1%}"  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
