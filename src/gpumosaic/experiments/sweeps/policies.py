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
from typing import TYPE_CHECKING

import numpy as np

from gpumosaic.errors import InputError
from gpumosaic.sim.result import JobStatus
from gpumosaic.sim.rounds import run_rounds
from gpumosaic.workloads.workload import Workload

if TYPE_CHECKING:
    from matplotlib.figure import Figure


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


def jct_vs_rate_figure(
    points: Sequence[PolicyRatePoint], title: str, *, seeds: Sequence[int] = ()
) -> Figure:
    """Gavel's figure: average JCT against input job rate, one line per policy (mean over
    seeds, error bar = sd); policies with identical curves are marked ``(= x)``."""
    from gpumosaic.experiments.plots.style import (
        display_labels,
        footnote,
        identical_note,
        identical_to,
        new_figure,
        seeds_label,
        series_style,
    )

    by_policy = {
        policy: sorted((p for p in points if p.policy == policy), key=lambda p: p.rate_per_hour)
        for policy in dict.fromkeys(p.policy for p in points)
    }
    same = identical_to(
        {
            k: ([p.rate_per_hour for p in v], [p.avg_jct_h for p in v], [p.std_jct_h for p in v])
            for k, v in by_policy.items()
        }
    )
    shown = display_labels(list(by_policy), same)
    fig = new_figure(7.5, 5.0)
    ax = fig.subplots()
    rates = sorted({p.rate_per_hour for p in points})
    # Policies side by side at each rate (a small dodge) so error bars do not hide each other.
    dodge = 0.012 * (rates[-1] - rates[0] if len(rates) > 1 else 1.0)
    for i, (policy, mine) in enumerate(by_policy.items()):
        style = series_style(i)
        shift = (i - (len(by_policy) - 1) / 2) * dodge
        ax.errorbar(
            [p.rate_per_hour + shift for p in mine],
            [p.avg_jct_h for p in mine],
            yerr=[p.std_jct_h for p in mine],
            marker=style.marker,
            ls=style.linestyle,
            lw=style.linewidth,
            color=style.color,
            markersize=max(4.0, 9.0 - 1.5 * i),
            zorder=style.zorder,
            capsize=3,
            label=shown[policy],
        )
    if 0 < len(rates) <= 12:
        ax.set_xticks(rates, [f"{r:g}" for r in rates])
    ax.set_xlabel("input job rate (jobs/hour)")
    n_seeds = max((p.seeds for p in points), default=0)
    ax.set_ylabel(f"average JCT (hours), mean ± sd over {n_seeds} seed(s)")
    ax.set_ylim(bottom=0)
    ax.margins(x=0.08)
    ax.grid(alpha=0.3)
    fig.legend(loc="outside right upper", fontsize=8)
    fig.suptitle(", ".join(p for p in (title, seeds_label(seeds)) if p), fontsize=10)
    dodged = "policies drawn slightly apart at each rate so error bars stay visible"
    footnote(fig, [dodged if len(by_policy) > 1 else "", identical_note(same)])
    return fig


def plot_jct_vs_rate(
    points: Sequence[PolicyRatePoint], path: Path, title: str, *, seeds: Sequence[int] = ()
) -> Path:
    """Gavel's figure as a PNG; ``title`` names the scenario, ``seeds`` are appended."""
    jct_vs_rate_figure(points, title, seeds=seeds).savefig(path, dpi=120)
    return path
