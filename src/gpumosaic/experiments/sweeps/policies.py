"""Policies x input rates x seeds with the round mechanism: Gavel's "avg JCT vs rate" figure.

A sweep point runs in its own process (``run_point`` is picklable); the workload is a
template such as ``gavel:window=4000-5000`` to which ``rate=R`` is appended, or
``gavel-stream:window=4000-5000`` for Gavel's own job stream (see ``gavel_stream``).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

from gpumosaic.errors import InputError
from gpumosaic.sim.result import JobStatus
from gpumosaic.sim.rounds import run_rounds
from gpumosaic.workloads.workload import Workload


@dataclass(frozen=True, slots=True)
class SweepPoint:
    policy: str
    rate_per_hour: float
    seed: int
    cluster: str
    workload: str  # template without rate
    placement: str


@dataclass(frozen=True, slots=True)
class PolicyRun:
    policy: str
    rate_per_hour: float
    seed: int
    placement: str
    avg_jct_h: float
    p99_jct_h: float
    makespan_h: float
    measured_jobs: int
    completed: int
    avg_fragmentation: float
    rounds: int
    policy_solves: int
    policy_solve_s: float
    elapsed_s: float


@dataclass(frozen=True, slots=True)
class PolicyRatePoint:
    """Mean and spread over seeds of one (policy, rate)."""

    policy: str
    rate_per_hour: float
    seeds: int
    avg_jct_h: float
    std_jct_h: float
    elapsed_s: float


def sweep_points(
    policies: Sequence[str],
    rates: Sequence[float],
    seeds: Sequence[int],
    cluster: str,
    workload: str,
    placement: str,
) -> list[SweepPoint]:
    if "rate=" in workload:
        raise InputError(
            "the workload template must not set rate= (--rates does)", field="--workload"
        )
    return [
        SweepPoint(p, float(r), int(s), cluster, workload, placement)
        for p in policies
        for r in rates
        for s in seeds
    ]


def with_rate(template: str, rate: float) -> str:
    kind, sep, rest = template.partition(":")
    args = ",".join(a for a in (rest, f"rate={rate:g}") if a)
    return f"{kind}:{args}" if sep else f"{template}:rate={rate:g}"


def build_workload(template: str, rate: float, seed: int) -> Workload:
    spec = with_rate(template, rate)
    if spec.startswith("gavel-stream:"):
        return _gavel_stream(spec.partition(":")[2], seed)
    from gpumosaic.workloads.spec import parse_workload

    return parse_workload(spec, seed).workload


def _gavel_stream(args: str, seed: int) -> Workload:
    from gpumosaic.workloads.gavel_stream import parse_gavel_stream

    return parse_gavel_stream(args, seed)


def run_point(point: SweepPoint) -> PolicyRun:
    from gpumosaic.workloads.spec import parse_cluster

    cluster = parse_cluster(point.cluster)
    workload = build_workload(point.workload, point.rate_per_hour, point.seed)
    result = run_rounds(cluster, workload, point.policy, point.placement, seed=point.seed)
    measured = [r for r in result.records if r.measured]
    done = [r for r in measured if r.status is JobStatus.COMPLETED]
    jct = np.array([r.jct_s for r in done]) / 3600.0
    frag = result.timeline.fragmentation_rate
    frag = frag[np.isfinite(frag)]
    makespan = (
        (max(r.finish_s for r in done) - min(r.arrival_s for r in measured)) / 3600.0
        if done
        else math.nan
    )
    return PolicyRun(
        policy=point.policy,
        rate_per_hour=point.rate_per_hour,
        seed=point.seed,
        placement=point.placement,
        avg_jct_h=float(jct.mean()) if len(jct) else math.nan,
        p99_jct_h=float(np.percentile(jct, 99)) if len(jct) else math.nan,
        makespan_h=makespan,
        measured_jobs=len(measured),
        completed=len(done),
        avg_fragmentation=float(frag.mean()) if len(frag) else math.nan,
        rounds=result.stats.rounds,
        policy_solves=result.stats.policy_solves,
        policy_solve_s=result.stats.policy_solve_s,
        elapsed_s=result.stats.elapsed_s,
    )


def aggregate(runs: Sequence[PolicyRun]) -> list[PolicyRatePoint]:
    groups: dict[tuple[str, float], list[PolicyRun]] = {}
    for run in runs:
        groups.setdefault((run.policy, run.rate_per_hour), []).append(run)
    out = []
    for (policy, rate), group in groups.items():
        jct = np.array([r.avg_jct_h for r in group])
        out.append(
            PolicyRatePoint(
                policy=policy,
                rate_per_hour=rate,
                seeds=len(group),
                avg_jct_h=float(np.nanmean(jct)),
                std_jct_h=float(np.nanstd(jct)),
                elapsed_s=float(sum(r.elapsed_s for r in group)),
            )
        )
    return sorted(out, key=lambda p: (p.policy, p.rate_per_hour))


def write_csv(runs: Sequence[PolicyRun], path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[fl.name for fl in fields(PolicyRun)])
        writer.writeheader()
        for run in runs:
            writer.writerow(asdict(run))


def plot_jct_vs_rate(points: Sequence[PolicyRatePoint], path: Path, title: str) -> Path:
    """Gavel's figure: average JCT against input job rate, one line per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for policy in dict.fromkeys(p.policy for p in points):
        mine = sorted((p for p in points if p.policy == policy), key=lambda p: p.rate_per_hour)
        ax.errorbar(
            [p.rate_per_hour for p in mine],
            [p.avg_jct_h for p in mine],
            yerr=[p.std_jct_h for p in mine],
            marker="o",
            capsize=3,
            label=policy,
        )
    ax.set_xlabel("input job rate (jobs/hr)")
    ax.set_ylabel("average JCT (hours)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
