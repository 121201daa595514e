"""The typer application that every command module registers on.

Command modules are imported on demand: running ``gpumosaic fill`` imports the ``fill``
module only, and ``--help`` imports every command module (for their help texts), none of
which imports what its command runs (the simulator, solvers, pandas, plots, servers) until
the command is called. ``COMMAND_MODULES`` is the one list of commands and their modules.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from typer.core import TyperGroup
from typer.main import get_group

from gpumosaic.errors import InputError

# Every top-level command, in the order --help lists them, and the modules of
# ``gpumosaic.cli`` that define it (a group's subcommands may come from several).
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "simulate": ("simulate",),
    "compare": ("compare",),
    "fill": ("fill",),
    "serve": ("serve",),
    "emulate": ("emulate",),
    "sim-vs-live": ("sim_vs_live",),
    "submit": ("jobs",),
    "jobs": ("jobs",),
    "job": ("jobs",),
    "logs": ("jobs",),
    "cancel": ("jobs",),
    "run": ("run",),
    "query": ("query",),
    "report": ("report",),
    "explain": ("explain",),
    "reproduce": ("reproduce", "reproduce_gavel", "reproduce_gandiva", "reproduce_gavel_openb"),
    "extender": ("extender",),
    "share": ("share",),
    "kernels": ("kernels",),
}


class LazyCommandGroup(TyperGroup):
    """The top-level group: a command is built from its module when it is first looked up
    (run, or listed by --help), so a command pays only for its own imports.

    (``Any`` in the signatures: recent typer releases ship their own copy of click, older
    ones use click itself, so the context and command types differ between versions.)
    """

    def list_commands(self, ctx: Any) -> list[str]:
        self._load(list(COMMAND_MODULES))
        return list(dict.fromkeys([*COMMAND_MODULES, *self.commands]))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in COMMAND_MODULES:
            self._load([cmd_name])
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        if args and args[0] not in COMMAND_MODULES and args[0] not in self.commands:
            self.list_commands(ctx)  # an unknown name: "did you mean ..." sees every command
        return super().resolve_command(ctx, args)

    def _load(self, names: list[str]) -> None:
        """Import the modules of commands ``names`` (they register on ``app``), then build
        those commands the way typer builds the group. A group whose subcommands come from
        several modules is rebuilt once they are all imported."""
        modules = dict.fromkeys(m for name in names for m in COMMAND_MODULES[name])
        new = [m for m in modules if f"gpumosaic.cli.{m}" not in sys.modules]
        if not new and all(name in self.commands for name in names):
            return
        for module in new:
            importlib.import_module(f"gpumosaic.cli.{module}")
        stale = set(names) | {n for n, ms in COMMAND_MODULES.items() if set(ms) & set(new)}
        for name, command in get_group(app).commands.items():
            if name in stale or name not in self.commands:
                self.commands[name] = command


app = typer.Typer(
    cls=LazyCommandGroup,
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
