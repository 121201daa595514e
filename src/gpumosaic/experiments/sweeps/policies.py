"""Policies x input rates x seeds with the round mechanism: Gavel's "avg JCT vs rate" figure.

A sweep point is a ``RunDescription`` run by the one run path (``run.build.run``) in
its own process (``run_point`` is picklable), so its row in ``policy_runs.csv`` has the
same columns and units as ``compare``'s ``runs.csv``; the workload is a
template such as ``gavel:window=4000-5000`` to which ``rate=R`` is appended, or
``gavel-stream:window=4000-5000`` for Gavel's own job stream (see ``gavel_stream``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from gpumosaic.errors import InputError
from gpumosaic.experiments.sweeps.runs import SweepRun, run_one
from gpumosaic.run.description import RunDescription

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


@dataclass(frozen=True, slots=True)
class SweepPoint:
    policy: str
    rate_per_hour: float
    seed: int
    cluster: str
    workload: str  # template without rate
    placement: str
    gpus_per_node: int = 1

    def description(self) -> RunDescription:
        """The run of this point: the same validated description ``simulate`` runs."""
        return RunDescription(
            cluster=self.cluster,
            workload=with_rate(self.workload, self.rate_per_hour),
            policy=self.policy,
            placement=self.placement,
            seed=self.seed,
            gpus_per_node=self.gpus_per_node,
            mechanism="rounds",
        )


@dataclass(frozen=True, slots=True)
class PolicyRatePoint:
    """Mean and spread over seeds of one (policy, rate); seconds, like every table."""

    policy: str
    rate_per_hour: float
    seeds: int
    avg_jct_s_mean: float
    avg_jct_s_sd: float
    ftf_rho_max_mean: float
    elapsed_s: float
    completed_mean: float = math.nan  # how the jobs ended, means over seeds
    rejected_mean: float = math.nan
    unfinished_mean: float = math.nan
    jobs_mean: float = math.nan  # jobs per run (the measured window's, where one is set)

    @property
    def avg_jct_h(self) -> float:
        return self.avg_jct_s_mean / 3600.0

    @property
    def std_jct_h(self) -> float:
        return self.avg_jct_s_sd / 3600.0


def sweep_points(
    policies: Sequence[str],
    rates: Sequence[float],
    seeds: Sequence[int],
    cluster: str,
    workload: str,
    placement: str,
    gpus_per_node: int = 1,
) -> list[SweepPoint]:
    if "rate=" in workload:
        raise InputError(
            "the workload template must not set rate= (--rates does)", field="--workload"
        )
    return [
        SweepPoint(p, float(r), int(s), cluster, workload, placement, gpus_per_node)
        for p in policies
        for r in rates
        for s in seeds
    ]


def with_rate(template: str, rate: float) -> str:
    kind, sep, rest = template.partition(":")
    args = ",".join(a for a in (rest, f"rate={rate:g}") if a)
    return f"{kind}:{args}" if sep else f"{template}:rate={rate:g}"


def run_point(point: SweepPoint) -> SweepRun:
    """One point through the one run path (picklable: runs in a worker process)."""
    return run_one(point.description())


def aggregate(points: Sequence[SweepPoint], runs: Sequence[SweepRun]) -> list[PolicyRatePoint]:
    """``runs[i]`` is the run of ``points[i]``."""
    groups: dict[tuple[str, float], list[SweepRun]] = {}
    for point, run in zip(points, runs, strict=True):
        groups.setdefault((point.policy, point.rate_per_hour), []).append(run)
    out = []
    for (policy, rate), group in groups.items():
        jct = np.array([r.summary.avg_jct_s for r in group])
        rho = np.array([r.summary.ftf_rho_max for r in group])
        out.append(
            PolicyRatePoint(
                policy=policy,
                rate_per_hour=rate,
                seeds=len(group),
                avg_jct_s_mean=float(np.nanmean(jct)),
                avg_jct_s_sd=float(np.nanstd(jct, ddof=1)) if len(group) > 1 else 0.0,
                ftf_rho_max_mean=float(np.nanmean(rho)) if np.isfinite(rho).any() else math.nan,
                elapsed_s=float(sum(r.summary.elapsed_s for r in group)),
                completed_mean=float(np.mean([r.summary.completed for r in group])),
                rejected_mean=float(np.mean([r.summary.rejected for r in group])),
                unfinished_mean=float(np.mean([r.summary.unfinished for r in group])),
                jobs_mean=float(np.mean([r.summary.jobs for r in group])),
            )
        )
    return sorted(out, key=lambda p: (p.policy, p.rate_per_hour))


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
    differ = _different_job_sets(ax, by_policy, dodge)
    fig.suptitle(", ".join(p for p in (title, seeds_label(seeds)) if p), fontsize=10)
    dodged = "policies drawn slightly apart at each rate so error bars stay visible"
    footnote(fig, [differ, dodged if len(by_policy) > 1 else "", identical_note(same)])
    return fig


def _different_job_sets(ax: Axes, by_policy: dict[str, list[PolicyRatePoint]], dodge: float) -> str:
    """At each rate where the policies completed different numbers of jobs, each point
    says how many (``38 of 40 done``, mean over seeds); the footnote names the rates."""
    done: dict[float, set[float]] = {}
    for mine in by_policy.values():
        for p in mine:
            if math.isfinite(p.completed_mean):
                done.setdefault(p.rate_per_hour, set()).add(round(p.completed_mean, 1))
    rates = sorted(r for r, counts in done.items() if len(counts) > 1)
    if not rates:
        return ""
    for i, mine in enumerate(by_policy.values()):
        shift = (i - (len(by_policy) - 1) / 2) * dodge
        for p in mine:
            if p.rate_per_hour in rates:
                of = f" of {p.jobs_mean:g}" if math.isfinite(p.jobs_mean) else ""
                ax.annotate(
                    f"{p.completed_mean:g}{of} done",
                    (p.rate_per_hour + shift, p.avg_jct_h),
                    xytext=(4, 4 + 9 * i),
                    textcoords="offset points",
                    fontsize=7,
                    color=f"C{i % 10}",
                )
    at = ", ".join(f"{r:g}" for r in rates)
    return (
        f"different job sets at {at} jobs/hour: the policies completed different numbers of "
        "jobs (marked at each point), so their JCTs are over different jobs"
    )


def plot_jct_vs_rate(
    points: Sequence[PolicyRatePoint], path: Path, title: str, *, seeds: Sequence[int] = ()
) -> Path:
    """Gavel's figure as a PNG; ``title`` names the scenario, ``seeds`` are appended."""
    jct_vs_rate_figure(points, title, seeds=seeds).savefig(path, dpi=120)
    return path
