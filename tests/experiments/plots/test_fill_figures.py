"""Fill-replay figures: seeds and scenario in titles, 0-100% rate axes with a zoom that
cannot blow up a wiggle, identical placements marked, fragmentation defined."""

from __future__ import annotations

import numpy as np
import pytest

from gpumosaic.experiments.plots.fill import (
    FILL_METRICS,
    fill_comparison_figure,
    fill_run_figure,
    plot_fill_comparison,
)
from gpumosaic.mechanisms.fill.simulator import PLACED, FillResult


def fill_result(placement: str, seed: int, cap_pct: float, frag_wiggle: float) -> FillResult:
    arrived = np.arange(0.0, 110.5, 0.5)
    n = len(arrived)
    return FillResult(
        placement=placement,
        seed=seed,
        inflate=1.1,
        cluster_gpu_milli=100_000,
        arrived_pct=arrived,
        allocation_rate_pct=np.minimum(arrived, cap_pct),
        fragmentation_rate_pct=40.0 + frag_wiggle * np.sin(arrived),
        fragmentation_pct=np.linspace(14.0, 5.0, n),
        power_gpu_w=np.linspace(1e5, 1e6, n),
        power_cpu_w=np.full(n, 5e4),
        fail_reason=np.full(n, PLACED, dtype=np.int8),
        task_kind=np.zeros(n, dtype=np.int8),
        elapsed_s=0.1,
        cpu_s=0.1,
    )


def results() -> list[FillResult]:
    return [
        fill_result(p, s, cap, wiggle)
        for p, cap, wiggle in (("bestfit", 93.0, 0.005), ("fgd", 95.0, 0.002))
        for s in (42, 43)
    ] + [fill_result("fgd-copy", s, 95.0, 0.002) for s in (42, 43)]


def test_comparison_titles_seeds_and_keeps_rates_on_0_to_100(figure_texts, legend_labels):
    metric = next(m for m in FILL_METRICS if m.file_name == "fragmentation_rate.png")
    fig = fill_comparison_figure(results(), metric, scenario="tasks openb:default on openb:gpu")
    whole, zoom = fig.axes
    assert "tasks openb:default on openb:gpu, seeds 42-43" in fig.get_suptitle()
    assert whole.get_ylim() == (0.0, 100.0)
    low, high = zoom.get_ylim()
    assert high - low >= 5.0  # a 0.005-point wiggle is not stretched over the panel
    assert legend_labels(whole) == ["bestfit (n=2)", "fgd (n=2)", "fgd-copy (= fgd) (n=2)"]
    text = figure_texts(fig)
    assert "fragmentation rate = free milli-GPU" in text and "fgd = fgd-copy" in text


@pytest.mark.slow  # a fill run and its figures: seconds of CPU
def test_power_is_not_a_rate_but_starts_at_zero(tmp_path):
    paths = plot_fill_comparison(results(), tmp_path, scenario="x")
    assert [p.name for p in paths] == [m.file_name for m in FILL_METRICS]
    assert all(p.stat().st_size > 0 for p in paths)
    power = next(m for m in FILL_METRICS if m.file_name == "power.png")
    whole, _ = fill_comparison_figure(results(), power).axes
    assert whole.get_ylim()[0] == 0.0 and whole.get_ylim()[1] > 100


def test_one_run_defines_fragmentation_rate_and_amount(figure_texts, legend_labels):
    fig = fill_run_figure(fill_result("fgd", 42, 95.0, 0.0), scenario="tasks openb:default")
    ax_alloc, ax_frag, _ = fig.axes
    assert fig.get_suptitle() == "fill replay: tasks openb:default, fgd, seed 42"
    assert ax_alloc.get_ylim() == ax_frag.get_ylim() == (0.0, 100.0)
    assert legend_labels(ax_frag) == [
        "fragmentation rate",
        "fragmentation amount (frag. % of GPUs)",
    ]
    text = figure_texts(fig)
    assert "fragmentation rate = free milli-GPU" in text
    assert "fragmentation amount (frag. % of GPUs) = " in text
