"""The run, comparison and timeline figures: scenario and seed in titles, hours on linear
time axes, 0-100% rate axes, a legend entry per line, identical series marked."""

from __future__ import annotations

import numpy as np

from gpumosaic.experiments.plots.runs import comparison_figure, run_figure, timelines_figure
from gpumosaic.experiments.store import run_title
from gpumosaic.results.result import Timeline
from gpumosaic.run.build import run
from gpumosaic.run.description import RunDescription

HOUR = 3600.0


def timeline(end_h: float, level: float) -> Timeline:
    """Allocation stepping up to ``level`` milli, then down, over ``end_h`` hours."""
    t = np.array([0.0, 0.5, 2.0, end_h]) * HOUR
    n = len(t)
    return Timeline(
        time_s=t,
        allocated_milli=np.array([0.0, level, level / 2, 0.0]),
        running=np.zeros(n, dtype=np.int64),
        queued=np.zeros(n, dtype=np.int64),
        fragmentation_rate=np.array([np.nan, 0.40, 0.40005, 0.0]),
        power_gpu_w=np.full(n, 300.0),
        power_cpu_w=np.full(n, 50.0),
    )


def test_timelines_read_in_hours_on_rate_axes_with_identical_series_marked(
    figure_texts, legend_labels
):
    lines = {"bestfit": timeline(5.5, 3000.0), "fgd": timeline(5.5, 3000.0)}
    lines["strided"] = timeline(5.5, 2000.0)
    fig = timelines_figure(lines, 4000.0, title="fifo on v100:4, gavel:jobs=50", seed=7)
    ax_alloc, ax_frag, _ = fig.axes
    text = figure_texts(fig)
    assert "fifo on v100:4, gavel:jobs=50, seed 7" in text
    for ax in (ax_alloc, ax_frag):
        assert ax.get_ylim() == (0.0, 100.0)  # a 0.005-point wiggle stays flat
    for ax in fig.axes:
        assert ax.get_xscale() == "linear" and ax.get_xlabel() == "time (hours)"
        ticks = [x for x in ax.get_xticks() if 0 <= x <= 5.5]
        assert len(ticks) >= 4  # a 5.5 h run gets readable ticks, not two
    labels = legend_labels(ax_alloc)
    assert labels == ["bestfit", "fgd (= bestfit)", "strided", "capacity (4 GPUs)"]
    styles = {
        line.get_label(): (line.get_linestyle(), line.get_linewidth()) for line in ax_alloc.lines
    }
    assert styles["bestfit"] != styles["fgd (= bestfit)"]  # both stay visible
    assert "identical results" in text and "bestfit = fgd" in text
    assert "fragmentation rate = free milli-GPU" in text


def test_one_run_names_its_scenario_and_seed(figure_texts, legend_labels):
    request = RunDescription(
        cluster="v100:2", workload="gavel:jobs=6,rate=0,milli=spatial", placement="bestfit", seed=5
    )
    outcome = run(request)
    fig = run_figure(outcome.result, title=run_title(request.to_json()))
    ax_cdf, ax_alloc, ax_frag = fig.axes
    title = fig.get_suptitle()
    assert "v100:2" in title and "gavel:jobs=6" in title and "fifo" in title
    assert "bestfit" in title and title.endswith("seed 5")
    assert ax_alloc.get_ylim() == ax_frag.get_ylim() == (0.0, 100.0)
    assert ax_alloc.get_xlabel() == "time (hours)"
    assert legend_labels(ax_alloc) == ["allocated", "capacity (2 GPUs)"]
    assert legend_labels(ax_cdf) == ["measured, completed jobs (n=6)"]
    assert "fragmentation rate = " in figure_texts(fig)


def test_comparison_marks_identical_placements_and_keeps_cdf_labels_apart(
    figure_texts, legend_labels
):
    rng = np.random.default_rng(0)
    a = [rng.lognormal(10, 1.5, 40) for _ in range(3)]  # JCTs over 3 orders of magnitude
    jcts = {"strided": [x * 1.2 for x in a], "best-fit": a, "fgd": [x.copy() for x in a]}
    avgs = {k: [float(x.mean()) for x in v] for k, v in jcts.items()}
    fig = comparison_figure(jcts, avgs, "fifo on v100:4, gavel:jobs=50", seeds=[0, 1, 2])
    ax_bar, ax_cdf = fig.axes
    assert fig.get_suptitle() == "fifo on v100:4, gavel:jobs=50, seeds 0-2"
    assert [t.get_text() for t in ax_bar.get_xticklabels()] == [
        "strided",
        "best-fit",
        "fgd (= best-fit)",
    ]
    assert legend_labels(ax_cdf) == ["strided", "best-fit", "fgd (= best-fit)"]
    assert "best-fit = fgd" in figure_texts(fig)
    # Log JCT axis: labels on 1-2-5 decades only (no crowded minor labels).
    fig.canvas.draw()
    shown = [t.get_text() for t in ax_cdf.get_xticklabels(minor=True) if t.get_text()]
    assert ax_cdf.get_xscale() == "log" and shown == []
    lo, hi = ax_cdf.get_xlim()
    majors = [x for x in ax_cdf.get_xticks() if lo <= x <= hi]
    assert 3 <= len(majors) <= 12
