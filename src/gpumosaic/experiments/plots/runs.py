"""Plots people would rather look at than read: JCT CDFs, utilization over time, bars."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers and CI
import matplotlib.pyplot as plt
import numpy as np
import numpy.typing as npt

from gpumosaic.metrics.summary import jct_values
from gpumosaic.sim.result import SimResult, Timeline

HOUR = 3600.0


def plot_run(result: SimResult, path: Path) -> Path:
    """Two panels: CDF of JCT, and allocated GPUs / fragmentation rate over time."""
    fig, (ax_cdf, ax_time) = plt.subplots(1, 2, figsize=(11, 4))
    jcts = np.sort(jct_values(result.records)) / HOUR
    if len(jcts):
        ax_cdf.step(jcts, np.arange(1, len(jcts) + 1) / len(jcts), where="post")
    ax_cdf.set(xlabel="JCT (hours)", ylabel="fraction of jobs", title="JCT CDF")
    ax_cdf.grid(alpha=0.3)
    t = result.timeline
    ax_time.step(t.time_s / HOUR, t.allocated_milli / 1000, where="post", label="GPUs allocated")
    ax_time.set(xlabel="time (hours)", ylabel="GPUs", title="cluster over time")
    ax_time.axhline(result.total_gpu_milli / 1000, color="grey", ls="--", lw=0.8)
    if not np.isnan(t.fragmentation_rate).all():
        twin = ax_time.twinx()
        twin.step(t.time_s / HOUR, t.fragmentation_rate * 100, where="post", color="C3", lw=0.8)
        twin.set_ylabel("fragmentation rate (%)", color="C3")
    ax_time.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_comparison(
    jcts_by_label: Mapping[str, Sequence[npt.NDArray[np.float64]]],
    avg_by_label: Mapping[str, Sequence[float]],
    path: Path,
    title: str,
) -> Path:
    """Bar chart of mean avg JCT (error bar = sd over seeds) and pooled JCT CDFs."""
    labels = list(avg_by_label)
    fig, (ax_bar, ax_cdf) = plt.subplots(1, 2, figsize=(12, 4.2))
    means = [np.mean(avg_by_label[k]) / HOUR for k in labels]
    sds = [np.std(avg_by_label[k]) / HOUR for k in labels]
    ax_bar.bar(labels, means, yerr=sds, capsize=4, color=[f"C{i}" for i in range(len(labels))])
    ax_bar.set(ylabel="avg JCT (hours)", title=title)
    ax_bar.tick_params(axis="x", rotation=20)
    ax_bar.grid(axis="y", alpha=0.3)
    for i, label in enumerate(labels):
        pooled = np.sort(np.concatenate(list(jcts_by_label[label]))) / HOUR
        if len(pooled):
            ax_cdf.step(
                pooled, np.arange(1, len(pooled) + 1) / len(pooled), label=label, color=f"C{i}"
            )
    ax_cdf.set(xlabel="JCT (hours)", ylabel="fraction of jobs", title="JCT CDF (all seeds)")
    ax_cdf.set_xscale("log")
    ax_cdf.grid(alpha=0.3)
    ax_cdf.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_timelines(timelines: Mapping[str, Timeline], total_gpu_milli: float, path: Path) -> Path:
    """Allocated GPUs, fragmentation rate and cluster power over time, one line per label."""
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    ax_alloc, ax_frag, ax_power = axes
    for i, (label, t) in enumerate(timelines.items()):
        hours = t.time_s / HOUR
        color = f"C{i}"
        ax_alloc.step(hours, t.allocated_milli / 1000, where="post", label=label, color=color)
        ax_frag.step(hours, t.fragmentation_rate * 100, where="post", color=color)
        power_kw = (t.power_gpu_w + t.power_cpu_w) / 1000
        ax_power.step(hours, power_kw, where="post", color=color)
    ax_alloc.axhline(total_gpu_milli / 1000, color="grey", ls="--", lw=0.8)
    ax_alloc.set(xlabel="time (hours)", ylabel="GPUs allocated", title="allocation")
    ax_frag.set(xlabel="time (hours)", ylabel="fragmentation rate (%)", title="fragmentation")
    ax_power.set(xlabel="time (hours)", ylabel="cluster power (kW)", title="power")
    for ax in axes:
        ax.grid(alpha=0.3)
        # Traces with a few very long jobs have a long quiet tail: a log time axis
        # keeps the busy start readable without hiding the tail.
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_xlim(left=0)
    ax_alloc.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
