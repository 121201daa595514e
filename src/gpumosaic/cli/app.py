"""The typer application that every command module registers on."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console

from gpumosaic.errors import InputError

app = typer.Typer(
    name="gpumosaic",
    help="Simulate, compare and serve GPU-cluster scheduling with shared GPUs: the same "
    "policies and placements drive the simulator, the round service on Ray (serve), the "
    "Kubernetes extender and the GPU time-sharing runtime (share).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err_console = Console(stderr=True)


def _print_version(value: bool) -> None:
    if value:
        from gpumosaic import __version__

        print(f"gpumosaic {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="print the version"
    ),
) -> None:
    """Simulate, compare and serve GPU-cluster scheduling with shared GPUs.

    Start with `gpumosaic simulate --help`; the README has a tour.
    """


F = TypeVar("F", bound=Callable[..., Any])


def user_errors(func: F) -> F:
    """Turn an InputError (a user mistake) into one red line on stderr and exit code 2."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except InputError as err:
            err_console.print(f"[red]error:[/red] {err}", highlight=False, soft_wrap=True)
            sys.exit(2)

    return wrapper  # type: ignore[return-value]


def check_out_dir(path: Path | None, flag: str = "--out") -> None:
    """Refuse an output folder that cannot be one, before any work is done."""
    if path is None:
        return
    if path.exists() and not path.is_dir():
        raise InputError(
            "is a file, not a folder: name a new or existing folder", field=flag, value=path
        )
    parent = next((p for p in (path, *path.parents) if p.exists()), Path("."))
    if not os.access(parent, os.W_OK):
        raise InputError(f"cannot write in {parent}", field=flag, value=path)


def check_seed(seed: int, flag: str = "--seed") -> None:
    if seed < 0:
        raise InputError("must be a whole number >= 0", field=flag, value=seed)
