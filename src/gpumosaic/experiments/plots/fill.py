"""Figures of fill replays: the paper's allocation-rate-vs-arrived-workload plot (one line
per placement, mean over seeds with a +-1 sd band), and the same for fragmentation and power.
Each ``*_figure`` builds a matplotlib Figure (tests inspect it); ``plot_*`` save PNGs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
from matplotlib.figure import Figure

from gpumosaic.experiments.plots.style import (
    DPI,
    FRAGMENTATION_AMOUNT_NOTE,
    FRAGMENTATION_RATE_NOTE,
    display_labels,
    footnote,
    identical_note,
    identical_to,
    new_figure,
    percent_axis,
    seeds_label,
    series_style,
    zoomed_percent_axis,
)
from gpumosaic.mechanisms.fill.simulator import FillResult, on_grid

ZOOM_FROM_PCT = 80.0
ARRIVED_LABEL = "arrived workload (% of cluster GPUs)"

Metric = Callable[[FillResult], npt.NDArray[np.float64]]


@dataclass(frozen=True, slots=True)
class FillMetric:
    file_name: str
    label: str
    values: Metric
    is_rate: bool  # a percentage: drawn on 0-100%
    note: str = ""


FILL_METRICS: tuple[FillMetric, ...] = (
    FillMetric(
        "allocation_rate.png",
        "GPU allocation rate (%)",
        lambda r: r.allocation_rate_pct,
        is_rate=True,
        note="allocation rate = allocated milli-GPU / the cluster's GPU capacity",
    ),
    FillMetric(
        "fragmentation_rate.png",
        "fragmentation rate (%)",
        lambda r: r.fragmentation_rate_pct,
        is_rate=True,
        note=FRAGMENTATION_RATE_NOTE,
    ),
    FillMetric(
        "power.png",
        "cluster power (kW)",
        lambda r: r.power_w / 1000.0,
        is_rate=False,
        note="power: PWR's model (a GPU with any allocation at full power, idle ones idle)",
    ),
)


def arrived_grid(results: Sequence[FillResult], step_pct: float = 1.0) -> npt.NDArray[np.float64]:
    top = min(float(r.arrived_pct[-1]) for r in results)
    return np.arange(step_pct, top + 1e-9, step_pct)


def fill_comparison_figure(
    results: Sequence[FillResult], metric: FillMetric, *, scenario: str = ""
) -> Figure:
    """Left: the whole replay; right: from ZOOM_FROM_PCT arrived, where placements differ.
    Placements whose mean curves coincide are marked ``(= x)`` and drawn so both show."""
    grid = arrived_grid(results)
    zoom = grid >= ZOOM_FROM_PCT
    placements = list(dict.fromkeys(r.placement for r in results))
    curves: dict[str, npt.NDArray[np.float64]] = {}
    counts: dict[str, int] = {}
    for placement in placements:
        runs = [r for r in results if r.placement == placement]
        curves[placement] = np.stack([metric.values(r)[on_grid(r, grid)] for r in runs])
        counts[placement] = len(runs)
    same = identical_to({p: (c.mean(axis=0),) for p, c in curves.items()})
    shown = display_labels(placements, same)
    fig = new_figure(13, 5.0)
    axes = fig.subplots(1, 2)
    for i, placement in enumerate(placements):
        style = series_style(i)
        mean, sd = curves[placement].mean(axis=0), curves[placement].std(axis=0)
        for ax, keep in zip(axes, (np.ones_like(zoom), zoom), strict=True):
            ax.plot(
                grid[keep],
                mean[keep],
                label=f"{shown[placement]} (n={counts[placement]})",
                color=style.color,
                ls=style.linestyle,
                lw=style.linewidth,
                zorder=style.zorder,
            )
            ax.fill_between(
                grid[keep], (mean - sd)[keep], (mean + sd)[keep], color=style.color, alpha=0.15
            )
    for ax in axes:
        ax.set_xlabel(ARRIVED_LABEL)
        ax.grid(alpha=0.3)
    if metric.is_rate:
        percent_axis(axes[0], metric.label)
        axes[1].set_ylabel(metric.label)
        zoomed_percent_axis(axes[1], np.concatenate([c[:, zoom].ravel() for c in curves.values()]))
    else:
        for ax in axes:
            ax.set_ylabel(metric.label)
        axes[0].set_ylim(bottom=0)
    axes[0].set_xlim(0, grid[-1])
    axes[0].set_title("whole replay")
    axes[1].set_title(f"zoom: from {ZOOM_FROM_PCT:.0f}% arrived (y axis not from 0)")
    axes[0].legend(fontsize=8, loc="best")
    seeds = seeds_label([r.seed for r in results])
    name = metric.label.removesuffix(" (%)")
    fig.suptitle(
        f"fill replay, {name}: "
        + ", ".join(p for p in (scenario, seeds) if p)
        + " (mean ± sd over seeds)"
    )
    footnote(fig, [metric.note, identical_note(same)])
    return fig


def plot_fill_comparison(
    results: Sequence[FillResult], out: Path, *, scenario: str = ""
) -> list[Path]:
    """Write one PNG per metric into ``out``; returns their paths. ``scenario`` names the
    task list and cluster for the titles (the seeds come from ``results``)."""
    paths = []
    for metric in FILL_METRICS:
        path = out / metric.file_name
        fill_comparison_figure(results, metric, scenario=scenario).savefig(path, dpi=DPI)
        paths.append(path)
    return paths


def fill_run_figure(result: FillResult, *, scenario: str = "") -> Figure:
    """One run: allocation rate, fragmentation (rate and amount) and power against the
    arrived workload."""
    fig = new_figure(15, 5.0)
    ax_alloc, ax_frag, ax_power = fig.subplots(1, 3)
    x = result.arrived_pct
    ax_alloc.plot(x, result.allocation_rate_pct, color="C0", label="allocation rate")
    percent_axis(ax_alloc, "GPU allocation rate (% of capacity)")
    ax_frag.plot(x, result.fragmentation_rate_pct, color="C3", label="fragmentation rate")
    ax_frag.plot(
        x,
        result.fragmentation_pct,
        color="C1",
        ls="--",
        label="fragmentation amount (frag. % of GPUs)",
    )
    percent_axis(ax_frag, "fragmentation (%)")
    ax_power.plot(x, result.power_w / 1000.0, color="C2", label="cluster power (GPU + CPU)")
    ax_power.set_ylabel("cluster power (kW)")
    ax_power.set_ylim(bottom=0)
    for ax, title in zip(
        (ax_alloc, ax_frag, ax_power), ("allocation", "fragmentation", "power"), strict=True
    ):
        ax.set_xlabel(ARRIVED_LABEL)
        ax.set_xlim(0, float(x[-1]) if len(x) else 100.0)
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    fig.suptitle(
        "fill replay: "
        + ", ".join(p for p in (scenario, result.placement, seeds_label([result.seed])) if p)
    )
    footnote(fig, [FRAGMENTATION_RATE_NOTE, FRAGMENTATION_AMOUNT_NOTE])
    return fig


def plot_fill_run(result: FillResult, path: Path, *, scenario: str = "") -> Path:
    """One run: allocation rate, fragmentation and power against arrived workload;
    ``scenario`` names the task list and cluster for the title."""
    fill_run_figure(result, scenario=scenario).savefig(path, dpi=DPI)
    return path
