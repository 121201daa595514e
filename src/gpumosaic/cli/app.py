"""The typer application that every command module registers on."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import typer
from rich.console import Console

from gpumosaic.errors import InputError

app = typer.Typer(
    name="gpumosaic",
    # Live serving (a round service, a Kubernetes extender) is being built; the help says
    # what the commands do today.
    help="Simulate, compare and reproduce GPU-cluster scheduling with shared GPUs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err_console = Console(stderr=True)

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
