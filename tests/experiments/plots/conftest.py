"""Fixtures to read what a matplotlib Figure shows (its texts and legends)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.text import Text


def _figure_texts(fig: Figure) -> str:
    return "\n".join(t.get_text() for t in fig.findobj(Text) if t.get_text())


def _legend_labels(ax: Axes) -> list[str]:
    legend = ax.get_legend()
    return [] if legend is None else [t.get_text() for t in legend.get_texts()]


@pytest.fixture
def figure_texts() -> Callable[[Figure], str]:
    """Every text drawn on a figure (titles, labels, legends, footnotes), one per line."""
    return _figure_texts


@pytest.fixture
def legend_labels() -> Callable[[Axes], list[str]]:
    """The entries of an axes' legend ([] without one)."""
    return _legend_labels
