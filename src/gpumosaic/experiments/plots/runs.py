"""Plots people would rather look at than read: JCT CDFs, allocation and fragmentation
over time, bars. Each ``*_figure`` builds a matplotlib Figure (tests inspect it); each
``plot_*`` saves one as a PNG."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from gpumosaic.experiments.plots.style import (
    DPI,
    FRAGMENTATION_RATE_NOTE,
    HOUR,
    display_labels,
    footnote,
    hours_axis,
    identical_note,
    identical_to,
    new_figure,
    percent_axis,
    seeds_label,
    series_style,
)
from gpumosaic.results.result import SimResult, Timeline
from gpumosaic.results.summary import jct_values

__all__ = [
    "HOUR",
    "comparison_figure",
    "plot_comparison",
    "plot_run",
    "plot_timelines",
    "run_figure",
    "timelines_figure",
]


def _cdf(ax: Axes, jcts_h: npt.NDArray[np.float64], label: str, index: int) -> None:
    style = series_style(index)
    ys = np.arange(1, len(jcts_h) + 1) / len(jcts_h)
    ax.step(
        jcts_h,
        ys,
        where="post",
        label=label,
        color=style.color,
        ls=style.linestyle,
        lw=style.linewidth,
        zorder=style.zorder,
    )


def _cdf_axis(ax: Axes, jcts_h: npt.NDArray[np.float64], title: str) -> None:
    ax.set(xlabel="JCT (hours)", ylabel="fraction of jobs", title=title)
    ax.set_ylim(0, 1.0)
    positive = jcts_h[jcts_h > 0]
    if len(positive) and positive.max() / positive.min() > 20:
        # JCTs spanning orders of magnitude: log axis, labels only at 1, 10, 100 ... (and
        # 2, 5 between) so they never run into each other.
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
    else:
        ax.set_xlim(left=0)
    ax.grid(alpha=0.3)


def _step_time(
    ax: Axes, t: Timeline, values: npt.NDArray[np.float64], label: str, index: int
) -> None:
    style = series_style(index)
    ax.step(
        t.time_s / HOUR,
        values,
        where="post",
        label=label,
        color=style.color,
        ls=style.linestyle,
        lw=style.linewidth,
        zorder=style.zorder,
    )


def _capacity_line(ax: Axes, capacity_gpus: float) -> None:
    """The 100% line, drawn over the (hidden) top frame so it stays visible."""
    ax.spines["top"].set_visible(False)
    ax.axhline(
        100.0,
        color="0.35",
        ls="--",
        lw=1.5,
        clip_on=False,
        zorder=10,
        label=f"capacity ({capacity_gpus:g} GPUs)",
    )


def _end_hours(timelines: Sequence[Timeline]) -> float:
    ends = [float(t.time_s[-1]) / HOUR for t in timelines if len(t.time_s)]
    return max(ends, default=0.0) or 1.0


def run_figure(result: SimResult, *, title: str = "") -> Figure:
    """JCT CDF, GPU allocation (% of capacity) and fragmentation rate over time."""
    fig = new_figure(14, 4.6)
    ax_cdf, ax_alloc, ax_frag = fig.subplots(1, 3)
    jcts = np.sort(jct_values(result.records)) / HOUR
    if len(jcts):
        _cdf(ax_cdf, jcts, f"measured, completed jobs (n={len(jcts)})", 0)
        ax_cdf.legend(fontsize=8, loc="lower right")
    _cdf_axis(ax_cdf, jcts, "JCT CDF")
    t = result.timeline
    capacity_gpus = result.total_gpu_milli / 1000
    allocated_pct = 100.0 * t.allocated_milli / max(result.total_gpu_milli, 1)
    _step_time(ax_alloc, t, allocated_pct, "allocated", 0)
    _capacity_line(ax_alloc, capacity_gpus)
    percent_axis(ax_alloc, "GPU allocation (% of capacity)")
    ax_alloc.set_title(f"allocation (capacity {capacity_gpus:g} GPUs)")
    ax_alloc.legend(fontsize=8, loc="lower right")
    sampled = ~np.isnan(t.fragmentation_rate)
    if sampled.any():
        _step_time(ax_frag, t, t.fragmentation_rate * 100, "fragmentation rate", 0)
        ax_frag.get_lines()[-1].set_color("C3")
        ax_frag.legend(fontsize=8, loc="upper right")
    else:
        ax_frag.text(0.5, 0.5, "not sampled in this run", ha="center", transform=ax_frag.transAxes)
    percent_axis(ax_frag, "fragmentation rate (% of free milli-GPU)")
    ax_frag.set_title("fragmentation")
    end = _end_hours([t])
    for ax in (ax_alloc, ax_frag):
        hours_axis(ax)
        ax.set_xlim(0, end)
        ax.grid(alpha=0.3)
    fig.suptitle(title or "one run")
    footnote(fig, [FRAGMENTATION_RATE_NOTE + " (docs/metrics.md)"])
    return fig


def plot_run(result: SimResult, path: Path, *, title: str = "") -> Path:
    """Three panels: CDF of JCT, allocation and fragmentation rate over time.
    ``title`` names the scenario (cluster, workload, policy, placement, seed)."""
    run_figure(result, title=title).savefig(path, dpi=DPI)
    return path


def comparison_figure(
    jcts_by_label: Mapping[str, Sequence[npt.NDArray[np.float64]]],
    avg_by_label: Mapping[str, Sequence[float]],
    title: str,
    *,
    seeds: Sequence[int] = (),
    completed: Mapping[str, Sequence[int]] | None = None,
    jobs: Mapping[str, Sequence[int]] | None = None,
) -> Figure:
    """Bar chart of mean avg JCT (error bar = sd over seeds) and pooled JCT CDFs.
    Labels whose every run gave the same JCTs as an earlier label's are marked ``(= x)``.
    ``completed`` / ``jobs`` (per label, per seed): where the labels completed different
    numbers of jobs, every label carries its count and a note says the JCTs are over
    different jobs (as the table's ``done`` column and compare's warning do)."""
    labels = list(avg_by_label)
    same = identical_to({k: tuple(np.sort(a) for a in jcts_by_label.get(k, ())) for k in labels})
    shown = display_labels(labels, same)
    differ = different_jobs_note(labels, completed or {}, jobs or {})
    if differ:
        for k in labels:
            done = float(np.mean(completed[k])) if completed and completed.get(k) else math.nan
            total = float(np.mean(jobs[k])) if jobs and jobs.get(k) else math.nan
            shown[k] += f" ({_count(done)} of {_count(total)} jobs done)"
    fig = new_figure(13, 4.8)
    ax_bar, ax_cdf = fig.subplots(1, 2)
    means = [np.mean(avg_by_label[k]) / HOUR for k in labels]
    sds = [np.std(avg_by_label[k]) / HOUR for k in labels]
    positions = np.arange(len(labels))
    bars = ax_bar.bar(
        positions,
        means,
        yerr=sds,
        capsize=4,
        color=[series_style(i).color for i in range(len(labels))],
    )
    ax_bar.bar_label(bars, labels=[f"{m:.2f}" for m in means], fontsize=8, label_type="center")
    ax_bar.set_xticks(positions, [shown[k] for k in labels], rotation=20, ha="right")
    n_seeds = max((len(v) for v in avg_by_label.values()), default=0)
    ax_bar.set(ylabel="avg JCT (hours)", title=f"avg JCT: mean ± sd over {n_seeds} seed(s)")
    ax_bar.set_ylim(bottom=0)
    ax_bar.grid(axis="y", alpha=0.3)
    pooled_all = []
    for i, label in enumerate(labels):
        pooled = np.sort(np.concatenate([*jcts_by_label.get(label, ()), np.empty(0)])) / HOUR
        pooled_all.append(pooled)
        if len(pooled):
            _cdf(ax_cdf, pooled, shown[label], i)
    _cdf_axis(
        ax_cdf, np.concatenate([*pooled_all, np.empty(0)]), "JCT CDF (all seeds' jobs pooled)"
    )
    ax_cdf.legend(fontsize=8, loc="lower right")
    fig.suptitle(", ".join(p for p in (title, seeds_label(seeds)) if p))
    footnote(fig, [differ, identical_note(same)])
    return fig


def _count(value: float) -> str:
    if math.isnan(value):
        return "?"
    return f"{value:,.0f}" if value == round(value) else f"{value:,.1f}"


def different_jobs_note(
    labels: Sequence[str],
    completed: Mapping[str, Sequence[int]],
    jobs: Mapping[str, Sequence[int]],
) -> str:
    """A line when the labels completed different numbers of jobs, else ``""``."""
    counts = {k: tuple(completed.get(k, ())) for k in labels}
    if len(set(counts.values())) <= 1:
        return ""
    means = ", ".join(f"{k} {_count(float(np.mean(v)))}" for k, v in counts.items() if v)
    return (
        f"different job sets: completed jobs (mean over seeds) {means}; the JCTs are over "
        "different jobs (compare --common-jobs averages the jobs every run completed)"
    )


def plot_comparison(
    jcts_by_label: Mapping[str, Sequence[npt.NDArray[np.float64]]],
    avg_by_label: Mapping[str, Sequence[float]],
    path: Path,
    title: str,
    *,
    seeds: Sequence[int] = (),
    completed: Mapping[str, Sequence[int]] | None = None,
    jobs: Mapping[str, Sequence[int]] | None = None,
) -> Path:
    """Bar chart of mean avg JCT (error bar = sd over seeds) and pooled JCT CDFs;
    ``title`` names the scenario, ``seeds`` are appended to it."""
    figure = comparison_figure(
        jcts_by_label, avg_by_label, title, seeds=seeds, completed=completed, jobs=jobs
    )
    figure.savefig(path, dpi=DPI)
    return path


def timelines_figure(
    timelines: Mapping[str, Timeline],
    total_gpu_milli: float,
    *,
    title: str = "",
    seed: int | None = None,
) -> Figure:
    """GPU allocation, fragmentation rate (both 0-100%) and cluster power over time, one
    line per label; identical timelines are marked ``(= x)`` and drawn so both show."""
    labels = list(timelines)
    same = identical_to(
        {
            k: (t.time_s, t.allocated_milli, t.fragmentation_rate, t.power_gpu_w + t.power_cpu_w)
            for k, t in timelines.items()
        }
    )
    shown = display_labels(labels, same)
    fig = new_figure(15, 5.0)
    ax_alloc, ax_frag, ax_power = fig.subplots(1, 3)
    for i, (label, t) in enumerate(timelines.items()):
        _step_time(
            ax_alloc, t, 100.0 * t.allocated_milli / max(total_gpu_milli, 1), shown[label], i
        )
        _step_time(ax_frag, t, t.fragmentation_rate * 100, shown[label], i)
        _step_time(ax_power, t, (t.power_gpu_w + t.power_cpu_w) / 1000, shown[label], i)
    capacity_gpus = total_gpu_milli / 1000
    percent_axis(ax_alloc, "GPU allocation (% of capacity)")
    ax_alloc.set_title(f"allocation (capacity {capacity_gpus:g} GPUs)")
    percent_axis(ax_frag, "fragmentation rate (% of free milli-GPU)")
    ax_frag.set_title("fragmentation")
    ax_power.set(ylabel="cluster power (kW)", title="power (GPU + CPU)")
    ax_power.set_ylim(bottom=0)
    end = _end_hours(list(timelines.values()))
    for ax in (ax_alloc, ax_frag, ax_power):
        hours_axis(ax)
        ax.set_xlim(0, end)
        ax.grid(alpha=0.3)
    _capacity_line(ax_alloc, capacity_gpus)
    # One legend for the three panels: the lines are drawn alike in each.
    ax_alloc.legend(fontsize=8, loc="lower left", title="all panels", title_fontsize=8)
    seed_text = "" if seed is None else seeds_label([seed])
    fig.suptitle(", ".join(p for p in (title, seed_text) if p) or "cluster over time")
    footnote(fig, [FRAGMENTATION_RATE_NOTE + " (docs/metrics.md)", identical_note(same)])
    return fig


def plot_timelines(
    timelines: Mapping[str, Timeline],
    total_gpu_milli: float,
    path: Path,
    *,
    title: str = "",
    seed: int | None = None,
) -> Path:
    """Allocation, fragmentation rate and power over time, one line per label; ``title``
    names the scenario and ``seed`` the run shown."""
    timelines_figure(timelines, total_gpu_milli, title=title, seed=seed).savefig(path, dpi=DPI)
    return path
