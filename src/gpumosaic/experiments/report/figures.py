"""The report's figures as plotly specs (plain dicts: data + layout), from a StudyView.

Which figures a study gets follows from what its runs stored: fill curves (x = arrived
workload) get allocation / fragmentation / power vs arrived workload with 95% bands; timed
runs get JCT CDFs and utilization / fragmentation / power over time; a numeric axis that
varies (load, rate) gets "metric vs load"; every study gets its metrics per group.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from gpumosaic.experiments.plots.style import display_labels, identical_note, identical_to
from gpumosaic.experiments.report.scenario import Scenario, scenario
from gpumosaic.experiments.report.stats import band, mean_ci
from gpumosaic.experiments.report.units import display
from gpumosaic.experiments.report.view import StudyView
from gpumosaic.experiments.study.kinds.base import ARRIVED_AXIS

MAX_LINE_POINTS = 1500
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")  # fmt: skip


@dataclass(frozen=True, slots=True)
class Figure:
    id: str
    title: str
    caption: str
    spec: dict[str, Any]


def _layout(title: str, x: str, y: str, **extra: Any) -> dict[str, Any]:
    # automargin + standoff: the axis title sits beyond the tick labels, however long
    # they are (a 143,047 on y, category names at an angle on x), never on them.
    return {
        "title": {"text": title, "font": {"size": 15}, "x": 0.01, "xanchor": "left"},
        "xaxis": {"title": {"text": x, "standoff": 12}, "zeroline": False, "automargin": True},
        "yaxis": {"title": {"text": y, "standoff": 12}, "zeroline": False, "automargin": True},
        "margin": {"l": 20, "r": 20, "t": 40, "b": 20},
        "height": 380,
        "legend": {"orientation": "v"},
        "hovermode": "closest",
        "template": None,
        **extra,
    }


# Dashes for a series whose data equal an earlier one's (as the PNGs, plots/style.py):
# drawn over each other, both stay visible, and the legend says which it equals.
_SAME_DASH = "dash"


def _mark_identical(
    traces: dict[str, list[dict[str, Any]]], series: dict[str, tuple[npt.ArrayLike, ...]]
) -> str:
    """Rename and dash the traces of labels whose series equal an earlier label's; returns
    the note for the caption ("" when every series differs)."""
    same = identical_to(series)
    names = display_labels(list(traces), same)
    for label, group in traces.items():
        for trace in group:
            if trace.get("showlegend", True) and "name" in trace:
                trace["name"] = trace["name"].replace(label, names[label], 1)
            if label in same:
                line = trace.setdefault("line", {})
                line["dash"] = _SAME_DASH
                line["width"] = max(1.0, float(line.get("width", 2)) - 0.5)
    return identical_note(same)


def _caption(text: str, note: str) -> str:
    return f"{text} {note[0].upper()}{note[1:]}." if note else text


def _r(values: npt.ArrayLike, digits: int = 4) -> list[float | None]:
    """Rounded, JSON-safe (NaN -> null) list: keeps the page small."""
    out: list[float | None] = []
    for v in np.asarray(values, dtype=float).tolist():
        out.append(None if not math.isfinite(v) else float(f"{v:.{digits}g}"))
    return out


def figures(view: StudyView) -> list[Figure]:
    """Every figure's title names what its runs share (``scenario``); where the groups
    finished different job sets, the bars and CDFs carry each group's count and every
    figure says so (as compare's PNG and warning do)."""
    sc = scenario(view)
    figs: list[Figure] = []
    fill = (view.runs["axis"] == ARRIVED_AXIS).any()
    if fill:
        figs.extend(_fill_curves(view))
    figs.extend(_metric_bars(view, sc))
    vs = _versus_load(view)
    if vs is not None:
        figs.append(vs)
    if not fill:
        cdf = _jct_cdf(view, sc)
        if cdf is not None:
            figs.append(cdf)
        figs.extend(_over_time(view))
    return [with_scenario(f, sc) for f in figs]


def with_scenario(fig: Figure, sc: Scenario) -> Figure:
    """The figure with the scenario under its title (so a PNG saved from the page still
    says what it shows) and, where job sets differ, that line too and the caption's note."""
    lines = [sc.text] if sc.text else []
    if sc.note:
        lines.append("different job sets: " + ", ".join(f"{g} {c}" for g, c in sc.counts.items()))
    if not lines:
        return fig
    layout = fig.spec["layout"]
    title = layout["title"]["text"]
    layout["title"]["text"] = title + "".join(f"<br><sup>{line}</sup>" for line in lines)
    layout["margin"] = {**layout["margin"], "t": 40 + 22 * len(lines)}
    caption = _caption(fig.caption, sc.note) if sc.note else fig.caption
    return Figure(fig.id, fig.title, caption, fig.spec)


def _counted(label: str, sc: Scenario) -> str:
    """``fgd (384 of 400 jobs done)`` where the groups finished different job sets."""
    return f"{label} ({sc.counts[label]})" if label in sc.counts else label


# -- fill replays: the FGD paper's figures -------------------------------------------------

_FILL_CURVES = (
    ("allocation_rate_pct", "GPU allocation rate vs arrived workload", "allocated (% of GPUs)"),
    ("fragmentation_rate_pct", "Fragmentation rate vs arrived workload",
     "fragmentation rate (% of free GPU milli)"),
    ("power_w", "Cluster power vs arrived workload", "power (kW)"),
)  # fmt: skip


_FILL_COLUMNS = [
    "arrived_pct", "allocation_rate_pct", "fragmentation_rate_pct", "power_gpu_w", "power_cpu_w",
]  # fmt: skip


def _fill_curves(view: StudyView) -> list[Figure]:
    top = (
        float(np.nanmax(view.runs["arrived_pct_final"]))
        if "arrived_pct_final" in view.runs
        else 130.0
    )
    grid = np.arange(1.0, math.floor(top) + 1.0, 1.0)
    curves: dict[str, dict[str, list[npt.NDArray[np.float64]]]] = {}
    for group, runs in view.groups():
        per: dict[str, list[npt.NDArray[np.float64]]] = {c: [] for c, _, _ in _FILL_CURVES}
        for run_id in runs["run_id"]:
            t = view.table(run_id, "timeline", _FILL_COLUMNS)
            if t is None or t.empty:
                continue
            arrived = t["arrived_pct"].to_numpy()
            idx = np.minimum(np.searchsorted(arrived, grid, side="left"), len(arrived) - 1)
            per["allocation_rate_pct"].append(t["allocation_rate_pct"].to_numpy()[idx])
            per["fragmentation_rate_pct"].append(t["fragmentation_rate_pct"].to_numpy()[idx])
            power = (t["power_gpu_w"].to_numpy() + t["power_cpu_w"].to_numpy()) / 1000.0
            per["power_w"].append(power[idx])
        curves[group] = per
    out = []
    for column, title, unit in _FILL_CURVES:
        traces: dict[str, list[dict[str, Any]]] = {}
        series: dict[str, tuple[npt.ArrayLike, ...]] = {}
        for i, (group, per) in enumerate(curves.items()):
            if not per[column]:
                continue
            color = PALETTE[i % len(PALETTE)]
            mean, low, high = band(np.vstack(per[column]))
            n = len(per[column])
            traces[group] = _band_traces(group, grid, mean, low, high, color, n)
            series[group] = (np.round(mean, 9),)
        note = _mark_identical(traces, series)
        data = [t for group in traces.values() for t in group]
        out.append(
            Figure(
                f"fill-{column}",
                title,
                _caption(
                    "Mean over seeds; the band is the 95% interval of the mean. Click a "
                    "legend entry to hide a placement, double-click to show it alone.",
                    note,
                ),
                {
                    "data": data,
                    "layout": _layout(title, "arrived workload, % of cluster GPUs", unit),
                },
            )
        )
    return out


def _band_traces(
    name: str,
    x: npt.NDArray[np.float64],
    mean: npt.NDArray[np.float64],
    low: npt.NDArray[np.float64],
    high: npt.NDArray[np.float64],
    color: str,
    n: int,
) -> list[dict[str, Any]]:
    xs = _r(x)
    return [
        {"x": xs, "y": _r(low), "mode": "lines", "line": {"width": 0, "color": color},
         "legendgroup": name, "showlegend": False, "hoverinfo": "skip", "type": "scatter"},
        {"x": xs, "y": _r(high), "mode": "lines", "line": {"width": 0, "color": color},
         "fill": "tonexty", "fillcolor": _alpha(color, 0.2), "legendgroup": name,
         "showlegend": False, "hoverinfo": "skip", "type": "scatter"},
        {"x": xs, "y": _r(mean), "mode": "lines", "line": {"width": 2, "color": color},
         "name": f"{name} (n={n})", "legendgroup": name, "type": "scatter"},
    ]  # fmt: skip


def _alpha(color: str, a: float) -> str:
    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{a})"


# -- per-group metrics, with the reference where there is one ------------------------------


def _metric_bars(view: StudyView, sc: Scenario) -> list[Figure]:
    groups = view.groups()
    out = []
    for metric in view.metrics[:4]:
        shown = display(metric)
        means = [
            (mean_ci(runs[metric]) if metric in runs else mean_ci([])).scaled(shown.scale)
            for _, runs in groups
        ]
        labels = [_counted(g, sc) for g, _ in groups]
        data: list[dict[str, Any]] = [
            {
                "type": "bar",
                "x": labels,
                "y": _r([m.mean for m in means]),
                "error_y": {"type": "data", "array": _r([m.half_width for m in means]),
                            "visible": True},
                "name": "ours (mean, 95% interval)",
                "marker": {"color": PALETTE[0]},
                "customdata": [m.n for m in means],
                "hovertemplate": "%{x}<br>%{y} (n=%{customdata})<extra></extra>",
            }
        ]  # fmt: skip
        ref_x, ref_y, ref_text = [], [], []
        for ref in view.experiment.reference:
            if ref.metric != metric:
                continue
            for group, runs in groups:
                if _matches(runs, ref.where):
                    ref_x.append(_counted(group, sc))
                    ref_y.append(shown.value(ref.value))
                    ref_text.append(ref.source)
        if ref_x:
            data.append(
                {"type": "scatter", "mode": "markers", "x": ref_x, "y": ref_y, "text": ref_text,
                 "name": "reference", "marker": {"symbol": "diamond", "size": 11,
                                                 "color": "#d62728"},
                 "hovertemplate": "%{x}<br>reference %{y}<br>%{text}<extra></extra>"}
            )  # fmt: skip
        title = f"{shown.words} per {', '.join(view.group_axes) or 'study'}"
        layout = category_layout(title, labels, ", ".join(view.group_axes), shown.label)
        out.append(
            Figure(
                f"bars-{metric}",
                title,
                "Bars: mean over the group's runs with its 95% interval; diamonds: the "
                "published reference (hover for the source).",
                {"data": data, "layout": layout},
            )
        )
    return out


def category_layout(title: str, labels: list[str], x: str, y: str) -> dict[str, Any]:
    """A bar chart's layout: many or long category names are drawn at an angle, with room."""
    layout = _layout(title, x, y, barmode="group")
    longest = max((len(label) for label in labels), default=0)
    if len(labels) > 8 or longest > 14:
        layout["xaxis"]["tickangle"] = -30
        layout["height"] = 380 + min(200, 6 * longest)
    return layout


def _matches(runs: pd.DataFrame, where: dict[str, Any]) -> bool:
    for key, value in where.items():
        if key not in runs:
            return False
        if not (runs[key].astype(str) == _as_str(value, runs[key])).any():
            return False
    return True


def _as_str(value: Any, column: pd.Series) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool) and column.dtype.kind == "f":
        return str(float(value))
    return str(value)


# -- metric vs load --------------------------------------------------------------------------


def _versus_load(view: StudyView) -> Figure | None:
    x = view.experiment.report.x or next((a for a in ("load", "rate") if a in view.axes), "")
    if not x or x not in view.runs:
        return None
    metric = next((m for m in view.metrics if "jct" in m), view.metrics[0])
    shown = display(metric)
    series_axes = tuple(a for a in view.group_axes if a != x)
    traces: dict[str, list[dict[str, Any]]] = {}
    series: dict[str, tuple[npt.ArrayLike, ...]] = {}
    for i, (name, runs) in enumerate(view.groups(series_axes)):
        points = sorted(runs[x].dropna().unique())
        stats_ = [mean_ci(runs.loc[runs[x] == v, metric]).scaled(shown.scale) for v in points]
        means = [s.mean for s in stats_]
        traces[name] = [
            {"type": "scatter", "mode": "lines+markers", "name": name, "x": _r(points),
             "y": _r(means),
             "error_y": {"type": "data", "array": _r([s.half_width for s in stats_]),
                         "visible": True},
             "line": {"color": PALETTE[i % len(PALETTE)], "width": 2}}
        ]  # fmt: skip
        series[name] = (np.asarray(points, dtype=float), np.asarray(means))
    note = _mark_identical(traces, series)
    title = f"{shown.words} vs {x}"
    return Figure(
        f"vs-{x}",
        title,
        _caption("Mean over seeds at each load with its 95% interval.", note),
        {"data": [t for g in traces.values() for t in g], "layout": _layout(title, x, shown.label)},
    )


# -- timed runs: JCT CDFs and the cluster over time ----------------------------------------


def _jct_cdf(view: StudyView, sc: Scenario) -> Figure | None:
    traces: dict[str, list[dict[str, Any]]] = {}
    series: dict[str, tuple[npt.ArrayLike, ...]] = {}
    spread = 1.0  # longest / median JCT
    for i, (group, runs) in enumerate(view.groups()):
        jcts = []
        for run_id in runs["run_id"]:
            jobs = view.table(run_id, "jobs", ["jct_s", "status", "measured"])
            if jobs is None or "jct_s" not in jobs:
                continue
            keep = jobs["status"] == "completed"
            if "measured" in jobs:  # the measurement window, as the summary's JCT
                keep &= jobs["measured"].astype(bool)
            done = jobs.loc[keep, "jct_s"].to_numpy(dtype=float)
            jcts.append(done[np.isfinite(done)])
        if not jcts:
            continue
        values = np.sort(np.concatenate(jcts)) / 3600.0
        values = values[values > 0]
        if len(values) == 0:
            continue
        spread = max(spread, float(values[-1] / np.median(values)))
        q = np.linspace(0, 1, min(len(values), 300))
        xs = np.quantile(values, q)
        traces[group] = [
            {"type": "scatter", "mode": "lines",
             "name": f"{group} ({sc.counts.get(group, f'{len(values)} jobs')})",
             "x": _r(xs), "y": _r(q),
             "line": {"shape": "hv", "color": PALETTE[i % 10], "width": 2}}
        ]  # fmt: skip
        series[group] = (values,)
    if not traces:
        return None
    note = _mark_identical(traces, series)
    layout = _layout("JCT CDF", "JCT (h)", "fraction of jobs")
    if spread > 100:  # a heavy tail: a log axis keeps the short jobs readable
        layout["xaxis"]["type"] = "log"
    return Figure(
        "jct-cdf",
        "JCT distribution",
        _caption(
            "Completed jobs of the group's runs (those measured, where a window is set), pooled.",
            note,
        ),
        {"data": [t for g in traces.values() for t in g], "layout": layout},
    )


_OVER_TIME = (
    ("allocation_rate", "Utilization over time", "allocated (% of GPU milli)", 100.0),
    ("fragmentation_rate", "Fragmentation rate over time",
     "fragmentation rate (% of free GPU milli)", 100.0),
    ("power_w", "Cluster power over time", "power (kW)", 1e-3),
)  # fmt: skip
_PERCENT_AXIS = {"range": [0, 100], "dtick": 20}  # a rate: always 0-100%, as the PNGs


def _over_time(view: StudyView) -> list[Figure]:
    """One run per group (its first seed): seeds differ only in their draws."""
    lines: dict[str, dict[str, list[dict[str, Any]]]] = {c: {} for c, _, _, _ in _OVER_TIME}
    series: dict[str, dict[str, tuple[npt.ArrayLike, ...]]] = {c: {} for c, _, _, _ in _OVER_TIME}
    for i, (group, runs) in enumerate(view.groups()):
        t = view.table(str(runs["run_id"].iloc[0]), "timeline")
        if t is None or t.empty or "time_s" not in t:
            continue
        step = max(1, len(t) // MAX_LINE_POINTS)
        t = t.iloc[::step]
        hours = t["time_s"].to_numpy() / 3600.0
        t = t.assign(power_w=t["power_gpu_w"] + t["power_cpu_w"])
        for column, _, _, scale in _OVER_TIME:
            if column not in t:
                continue
            y = t[column].to_numpy(dtype=float) * scale
            seed = runs["seed"].iloc[0] if "seed" in runs else ""
            lines[column][group] = [
                {"type": "scatter", "mode": "lines", "x": _r(hours), "y": _r(y),
                 "name": f"{group}" + (f" (seed {seed})" if seed != "" else ""),
                 "line": {"shape": "hv", "width": 1.5, "color": PALETTE[i % 10]},
                 "connectgaps": True}
            ]  # fmt: skip
            series[column][group] = (hours, y)
    out = []
    for column, title, unit, scale in _OVER_TIME:
        if not lines[column]:
            continue
        note = _mark_identical(lines[column], series[column])
        layout = _layout(title, "time (h)", unit)
        if scale == 100.0:
            layout["yaxis"].update(_PERCENT_AXIS)
        out.append(
            Figure(
                f"time-{column}",
                title,
                _caption(
                    "One run per group (its first seed); step lines, sampled at every change.",
                    note,
                ),
                {"data": [t for g in lines[column].values() for t in g], "layout": layout},
            )
        )
    return out
