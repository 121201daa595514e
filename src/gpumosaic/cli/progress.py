"""A rich progress bar on stderr that simulators report a done-fraction to."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from gpumosaic.cli.app import err_console


@contextmanager
def progress_bar(
    enabled: bool, label: str = "simulating"
) -> Iterator[Callable[[float], None] | None]:
    if not enabled:
        yield None
        return
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
