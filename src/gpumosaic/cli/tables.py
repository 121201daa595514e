"""Every table a command prints, readable at 80 columns (a default terminal, any pipe).

``show`` prints a rich table at the console's own width: no cell is ever cut to ``…``
(a long cell wraps between words, or folds), the identifying columns (a name, a
placement, a policy) are kept whole on one line so rows stay tellable apart, and a
table with more columns than the width holds is printed as several tables one under
the other, each repeating the identifying columns. tests/cli/test_tables_80.py renders
the commands' tables at 80 columns.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich is imported by the commands that print a table, when they do
    from rich.console import Console
    from rich.table import Column, Table


def fit(table: Table, identifying: Sequence[str] = ()) -> Table:
    """``table`` made to wrap or fold, never cut; ``identifying``: header names kept on
    one line."""
    from rich.text import Text

    for column in table.columns:
        column.overflow = "fold"
        texts = [Text.from_markup(str(c)).plain for c in column.cells]
        if str(column.header) in identifying:
            longest = max((Text(t).cell_len for t in texts), default=0)
            column.no_wrap = True
        else:  # wraps between words, not inside one (a number stays whole)
            words = [w for t in [*texts, str(column.header)] for w in t.split()]
            longest = max((Text(w).cell_len for w in words), default=1)
        column.min_width = max(longest, column.min_width or 0)
    return table


def _natural(column: Column) -> int:
    """The column's width with nothing wrapped."""
    from rich.text import Text

    texts = [Text.from_markup(str(c)).plain for c in [*column.cells, column.header]]
    return max((Text(t).cell_len for t in texts), default=1)


def _width(table: Table, columns: Sequence[Column], natural: bool = False) -> int:
    """The width of ``table`` with just ``columns``, each at its minimum (or, with
    ``natural``, with nothing wrapped)."""
    from rich.padding import Padding

    _, right, _, left = Padding.unpack(table.padding)
    n = len(columns)
    widths = [_natural(c) if natural else c.min_width or 1 for c in columns]
    cells = sum(widths) + (left + right) * n
    edges = 0 if table.pad_edge else left + right
    rules = 0 if table.box is None else (n + 1 if table.show_edge else n - 1)
    # Shrunk, a column of slack each: rich's shrinking of wrapped columns stops a little
    # above their minimum widths.
    return cells - edges + rules + (0 if natural else n)


def _part(table: Table, columns: Sequence[Column], title: bool) -> Table:
    from rich.table import Table

    part = Table(
        title=table.title if title else None,
        box=table.box,
        pad_edge=table.pad_edge,
        show_edge=table.show_edge,
        header_style=table.header_style,
        padding=table.padding,
    )
    part.columns = [dataclasses.replace(c, _index=i) for i, c in enumerate(columns)]
    part.rows = list(table.rows)
    return part


def show(table: Table, identifying: Sequence[str] = (), console: Console | None = None) -> None:
    """Print ``table`` fitted to the console; split into several tables (identifying
    columns repeated) where its columns do not fit side by side."""
    if console is None:
        from rich.console import Console

        console = Console()
    fit(table, identifying)
    if min(_width(table, table.columns, natural=True), _width(table, table.columns)) <= (
        console.width
    ):
        console.print(table)
        return
    ident = [c for c in table.columns if str(c.header) in identifying]
    others = [c for c in table.columns if c not in ident]
    widest = max(others, key=lambda c: c.min_width or 1, default=None)
    if widest is not None and _width(table, [*ident, widest]) > console.width:
        # The identifying columns alone leave no room (a very long name): they fold too,
        # onto a second line, down to their widest word.
        for column in ident:
            column.no_wrap = False
            column.min_width = min(column.min_width or 1, max(12, console.width // 4))
    chunks: list[list[Column]] = [[]]
    for column in table.columns:
        if column in ident:
            continue
        if chunks[-1] and _width(table, [*ident, *chunks[-1], column]) > console.width:
            chunks.append([])
        chunks[-1].append(column)
    for i, chunk in enumerate(chunks):
        part = _part(table, [*ident, *chunk], title=i == 0)
        # A single column wider than the console even so: printed wider (not cut), so
        # that nothing is left out.
        width = max(console.width, _width(part, part.columns))
        console.print(part, width=width, crop=False)
