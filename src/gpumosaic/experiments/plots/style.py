"""What every gpumosaic figure shares: titles naming the scenario and seeds, time axes in
hours, rate axes on 0-100%, line styles that keep overlapping series visible, identical
series named as such, and the footnotes that define fragmentation (docs/metrics.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers and CI
import numpy as np
import numpy.typing as npt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, MultipleLocator

HOUR = 3600.0
DPI = 120

FRAGMENTATION_RATE_NOTE = (
    "fragmentation rate = free milli-GPU that the typical jobs (FGD's target workload) "
    "cannot use / all free milli-GPU"
)
FRAGMENTATION_AMOUNT_NOTE = (
    "fragmentation amount (frag. % of GPUs) = that unusable free milli-GPU / "
    "the cluster's whole GPU capacity"
)

_LINESTYLES = ("-", "--", "-.", ":")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


@dataclass(frozen=True, slots=True)
class SeriesStyle:
    """How one series is drawn: distinct color, dash and marker, and a width that shrinks
    with the drawing order so a later line drawn over an identical one leaves it visible."""

    color: str
    linestyle: str
    marker: str
    linewidth: float
    zorder: float


def series_style(index: int) -> SeriesStyle:
    return SeriesStyle(
        color=f"C{index % 10}",
        linestyle=_LINESTYLES[index % len(_LINESTYLES)],
        marker=_MARKERS[index % len(_MARKERS)],
        linewidth=max(1.0, 2.8 - 0.5 * index),
        zorder=2.0 + index,
    )


def seeds_label(seeds: Sequence[int]) -> str:
    """``seed 3``, ``seeds 0-9`` for a run of consecutive seeds, else ``seeds 0, 4, 7``."""
    unique = sorted(set(int(s) for s in seeds))
    if not unique:
        return ""
    if len(unique) == 1:
        return f"seed {unique[0]}"
    if unique == list(range(unique[0], unique[-1] + 1)):
        return f"seeds {unique[0]}-{unique[-1]}"
    return "seeds " + ", ".join(str(s) for s in unique)


def same_series(a: npt.ArrayLike, b: npt.ArrayLike) -> bool:
    """Equal shapes and values (NaN equal to NaN): what would be drawn as one line."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return x.shape == y.shape and bool(np.allclose(x, y, rtol=1e-9, atol=1e-9, equal_nan=True))


def identical_to(series: Mapping[str, Sequence[npt.ArrayLike]]) -> dict[str, str]:
    """For each label whose data equal an earlier label's, that earlier label.

    A series is a tuple of arrays (e.g. times and values); labels not in the result
    have data of their own."""
    out: dict[str, str] = {}
    seen: list[str] = []
    for label, arrays in series.items():
        for earlier in seen:
            other = series[earlier]
            if len(other) == len(arrays) and all(
                same_series(p, q) for p, q in zip(other, arrays, strict=True)
            ):
                out[label] = out.get(earlier, earlier)
                break
        else:
            seen.append(label)
    return out


def display_labels(labels: Sequence[str], same: Mapping[str, str]) -> dict[str, str]:
    """Legend text: ``fgd (= bestfit)`` where fgd's series is bestfit's."""
    return {k: f"{k} (= {same[k]})" if k in same else k for k in labels}


def identical_note(same: Mapping[str, str]) -> str:
    if not same:
        return ""
    groups: dict[str, list[str]] = {}
    for label, first in same.items():
        groups.setdefault(first, [first]).append(label)
    parts = [" = ".join(g) for g in groups.values()]
    return "identical results (drawn over each other, told apart by dashes): " + "; ".join(parts)


def hours_axis(ax: Axes, label: str = "time (hours)") -> None:
    """Linear time in hours from 0, with 5-8 round ticks whatever the run's length."""
    ax.set_xlabel(label)
    ax.set_xlim(left=0)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=7, steps=[1, 2, 2.5, 5, 10], min_n_ticks=4))


def percent_axis(ax: Axes, label: str) -> None:
    """A rate: always 0-100%, so a 0.005-point wiggle stays a wiggle."""
    ax.set_ylabel(label)
    ax.set_ylim(0, 100)
    ax.yaxis.set_major_locator(MultipleLocator(20))


def zoomed_percent_axis(ax: Axes, values: npt.ArrayLike, min_span: float = 5.0) -> None:
    """A zoomed view of a rate that still spans at least ``min_span`` points."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if not len(v):
        return
    low, high = float(v.min()), float(v.max())
    pad = max(min_span - (high - low), 0.0) / 2 + 0.05 * (high - low)
    low, high = max(0.0, low - pad), min(100.0, high + pad)
    if high - low < min_span:  # against a bound: extend the other way
        low, high = (0.0, min_span) if low <= 0 else (100.0 - min_span, 100.0)
    ax.set_ylim(low, high)


def footnote(fig: Figure, lines: Sequence[str]) -> None:
    """Definitions and notes under the axes, one per line (constrained layout makes room)."""
    text = "\n".join(line for line in lines if line)
    if text:
        fig.supxlabel(text, fontsize=8, ha="left", x=0.01, color="0.25")


def new_figure(width: float, height: float) -> Figure:
    """A figure outside pyplot's global state (nothing to close; safe in workers)."""
    return Figure(figsize=(width, height), layout="constrained")
