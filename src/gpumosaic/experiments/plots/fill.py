"""Figures of fill replays: the paper's allocation-rate-vs-arrived-workload plot (one line
per placement, mean over seeds with a +-1 sd band), and the same for fragmentation and power."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, never a window
import matplotlib.pyplot as plt
import numpy as np
import numpy.typing as npt

from gpumosaic.experiments.sweeps.fill import on_grid
from gpumosaic.sim.fill import FillResult

ZOOM_FROM_PCT = 80.0

Metric = Callable[[FillResult], npt.NDArray[np.float64]]

FIGURES: tuple[tuple[str, str, Metric], ...] = (
    ("allocation_rate.png", "GPU allocation rate (%)", lambda r: r.allocation_rate_pct),
    ("fragmentation_rate.png", "fragmentation rate (%)", lambda r: r.fragmentation_rate_pct),
    ("power.png", "cluster power (kW)", lambda r: r.power_w / 1000.0),
)


def arrived_grid(results: Sequence[FillResult], step_pct: float = 1.0) -> npt.NDArray[np.float64]:
    top = min(float(r.arrived_pct[-1]) for r in results)
    return np.arange(step_pct, top + 1e-9, step_pct)


def plot_fill_comparison(results: Sequence[FillResult], out: Path) -> list[Path]:
    """Write one PNG per metric into ``out``; returns their paths."""
    grid = arrived_grid(results)
    paths = []
    for file_name, label, metric in FIGURES:
        # Left: the whole replay; right: the saturated end, where placements differ.
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        zoom = grid >= ZOOM_FROM_PCT
        for placement in dict.fromkeys(r.placement for r in results):
            runs = [r for r in results if r.placement == placement]
            curves = np.stack([metric(r)[on_grid(r, grid)] for r in runs])
            mean, sd = curves.mean(axis=0), curves.std(axis=0)
            for ax, keep in zip(axes, (np.ones_like(zoom), zoom), strict=True):
                (line,) = ax.plot(grid[keep], mean[keep], label=f"{placement} (n={len(runs)})")
                ax.fill_between(
                    grid[keep],
                    (mean - sd)[keep],
                    (mean + sd)[keep],
                    color=line.get_color(),
                    alpha=0.2,
                )
        for ax in axes:
            ax.set_xlabel("arrived workload (% of cluster GPUs)")
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
        axes[1].set_title(f"from {ZOOM_FROM_PCT:.0f}% arrived")
        axes[0].legend(fontsize="small")
        fig.tight_layout()
        path = out / file_name
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    return paths


def plot_fill_run(result: FillResult, path: Path) -> Path:
    """One run: allocation rate, fragmentation rate and power against arrived workload."""
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for ax, (_, label, metric) in zip(axes, FIGURES, strict=True):
        ax.plot(result.arrived_pct, metric(result))
        ax.set_xlabel("arrived workload (%)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    fig.suptitle(f"{result.placement}, seed {result.seed}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
