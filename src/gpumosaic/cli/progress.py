"""Rich progress bars on stderr: a done-fraction (one simulation) or a count (a sweep).

``rich.progress`` is imported only when a bar is shown (not with --json or off a terminal)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from gpumosaic.cli.app import err_console


@contextmanager
def progress_bar(
    enabled: bool, label: str = "simulating"
) -> Iterator[Callable[[float], None] | None]:
    if not enabled:
        yield None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn(label),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    ) as progress:
        task = progress.add_task(label, total=1.0)

        def update(fraction: float) -> None:
            progress.update(task, completed=fraction)

        yield update


@contextmanager
def counter_bar(
    enabled: bool, label: str, total: float | None = None
) -> Iterator[Callable[..., None]]:
    """``update(done, total=None)`` sets the count done (and the total, once known)."""
    if not enabled:
        yield lambda _done, _total=None: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err_console, transient=True) as progress:
        task = progress.add_task(label, total=total)

        def update(done: float, total: float | None = None) -> None:
            if total is None:
                progress.update(task, completed=done)
            else:
                progress.update(task, completed=done, total=total)

        yield update
