"""Shared figure conventions: seed labels, identical-series detection, rate zoom floors."""

from __future__ import annotations

import itertools

import numpy as np

from gpumosaic.experiments.plots.style import (
    display_labels,
    identical_note,
    identical_to,
    new_figure,
    seeds_label,
    series_style,
    zoomed_percent_axis,
)


def test_seeds_label_compresses_consecutive_seeds():
    assert seeds_label([3]) == "seed 3"
    assert seeds_label([2, 0, 1, 1]) == "seeds 0-2"
    assert seeds_label([0, 4, 7]) == "seeds 0, 4, 7"
    assert seeds_label([]) == ""


def test_identical_series_point_to_the_first_of_their_group():
    x = np.array([0.0, 1.0, np.nan])
    same = identical_to(
        {"a": (x,), "b": (x + 1,), "c": (x.copy(),), "d": (x.copy(),), "e": (x[:2],)}
    )
    assert same == {"c": "a", "d": "a"}  # NaN equals NaN; a shorter series is different
    assert display_labels(["a", "c"], same) == {"a": "a", "c": "c (= a)"}
    assert identical_note(same).endswith("a = c = d")
    assert identical_note({}) == ""


def test_overlapping_series_get_distinct_dashes_and_shrinking_widths():
    styles = [series_style(i) for i in range(4)]
    assert len({s.linestyle for s in styles}) == 4
    assert all(a.linewidth > b.linewidth for a, b in itertools.pairwise(styles))


def test_a_zoomed_rate_never_turns_a_wiggle_into_a_cliff():
    ax = new_figure(4, 3).subplots()
    zoomed_percent_axis(ax, [40.0, 40.005, 40.002])
    low, high = ax.get_ylim()
    assert high - low >= 5.0 and low <= 40.0 <= high
    zoomed_percent_axis(ax, [99.99, 100.0])  # against the top: still 5 points, within 0-100
    assert ax.get_ylim() == (95.0, 100.0)
