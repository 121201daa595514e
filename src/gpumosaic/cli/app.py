"""The typer application that every command module registers on.

Command modules are imported on demand: running ``gpumosaic fill`` imports the ``fill``
module only, and ``gpumosaic --help`` imports none (it lists each command with its line
from ``COMMAND_HELP``; tests/cli/test_startup_imports.py checks that line against the
command's own help). No command module imports what its command runs (the simulator,
solvers, pandas, plots, servers) until the command is called. ``COMMAND_MODULES`` is the
one list of commands and their modules.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import math
import sys
import tempfile
from collections.abc import Callable, Sequence
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from typer.core import TyperCommand, TyperGroup
from typer.main import get_group

from gpumosaic.cli.shown import markup_safe
from gpumosaic.errors import InputError, Interrupted

# Every top-level command, in the order --help lists them, and the modules of
# ``gpumosaic.cli`` that define it (a group's subcommands may come from several).
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "simulate": ("simulate",),
    "compare": ("compare.command",),
    "fill": ("fill",),
    "serve": ("serve",),
    "emulate": ("emulate",),
    "sim-vs-live": ("sim_vs_live.command",),
    "submit": ("submit",),
    "jobs": ("jobs",),
    "job": ("jobs",),
    "logs": ("jobs",),
    "cancel": ("jobs",),
    "run": ("run",),
    "query": ("query",),
    "report": ("report",),
    "explain": ("explain",),
    "reproduce": (
        "reproduce.group",
        "reproduce.gavel",
        "reproduce.gandiva",
        "reproduce.gavel_openb",
    ),
    "extender": ("extender",),
    "share": ("share",),
    "slurm": ("slurm",),
    "kernels": ("kernels",),
}

# The line ``gpumosaic --help`` shows for a command (the first paragraph of its help), so
# that listing the commands imports none of them. A command missing here is imported to
# list it (correct, only slower).
COMMAND_HELP: dict[str, str] = {
    "simulate": "Simulate one policy + placement on a workload and report JCT, utilization, etc.",
    "compare": "Compare placements (or policies) over seeds: table, CSV and plots.",
    "fill": "Fill the cluster with tasks that never leave (the FGD / PWR experiment).",
    "serve": "Run jobs on GPUs in leased rounds (Gavel's physical mode on Ray); Ctrl-C stops.",
    "emulate": "A job that steps at Gavel's table rate for its type (or at --rates) on the GPU "
    "model it was given (GPUMOSAIC_GPU_MODEL), times the service's time scale, through "
    "gpumosaic.lease.",
    "sim-vs-live": "Run a workload on a local live service (emulated jobs on Ray, loopback, or "
    "as Slurm batch jobs) and in the simulator (--mechanism rounds), and print both side by side.",
    "submit": (
        "Submit a job (or a job list: every row checked first, then all or none); prints the id(s)."
    ),
    "jobs": "The service's jobs: state, progress, GPU type and index, attained time, steps/s.",
    "job": "One job in full (with the tail of its log).",
    "logs": "The job's output (all its leases, newest last).",
    "cancel": "Cancel jobs: a running one gets SIGTERM (it checkpoints), then the grace period.",
    "run": "Run every point of an experiment's grid not yet in the result folder.",
    "query": "Query a result folder with SQL. Tables: runs (one row per run: grid columns and "
    "summary metrics), jobs, timeline and placements (every run's, with run_id).",
    "report": "Write DIR/report.html: the grid with 95% intervals, the reference figures, ours "
    "beside the reference, a GPU occupancy mosaic and why jobs waited (opens offline).",
    "explain": "The verdicts over one job's life, from what the run stored.",
    "reproduce": "Reproduce published measurements and print ours beside theirs.",
    "extender": "Serve a placement to kube-scheduler as an HTTP extender (filter, prioritize, "
    "bind).",
    "share": "Time-share GPUs between unmodified processes (an nvshare-style runtime).",
    "slurm": "Set a Slurm cluster up for gpumosaic serve --executor slurm (docs/slurm.md).",
    "kernels": "Build the ahead-of-time kernel library: the kernels without numba's "
    "~0.6 s start-up (numba's JIT runs them, with the same results, where it is missing).",
}


class WrappingGroup(TyperGroup):
    """A group whose help lists each command's whole first paragraph, wrapped to the
    terminal (click cuts it to one line with "...")."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            text = command.short_help or (command.help or "").split("\n\n")[0]
            rows.append((name, " ".join(text.split())))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


class LazyCommandGroup(WrappingGroup):
    """The top-level group: a command is built from its module when it is run (or its own
    help is asked for), so a command pays only for its own imports; ``gpumosaic --help``
    lists placeholders that carry ``COMMAND_HELP``'s line and import nothing.

    (``Any`` in the signatures: recent typer releases ship their own copy of click, older
    ones use click itself, so the context and command types differ between versions.)
    """

    def list_commands(self, ctx: Any) -> list[str]:
        self._load([name for name in COMMAND_MODULES if name not in COMMAND_HELP])
        return list(dict.fromkeys([*COMMAND_MODULES, *self.commands]))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """The command, or (for a listing) a placeholder with its help line."""
        if cmd_name in self.commands or cmd_name not in COMMAND_MODULES:
            return self.commands.get(cmd_name)
        if cmd_name in COMMAND_HELP:
            return _Listed(name=cmd_name, help=COMMAND_HELP[cmd_name])
        self._load([cmd_name])
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        if args and args[0] in COMMAND_MODULES:
            self._load([args[0]])  # the command itself, not a placeholder, is run
        elif args and args[0] not in self.commands:
            # An unknown name: "did you mean" from the names alone, importing no command.
            self._load([name for name in COMMAND_MODULES if name not in COMMAND_HELP])
            try:
                return super().resolve_command(ctx, args)
            except Exception as err:
                message = getattr(err, "message", None)
                if isinstance(message, str):
                    # click suggests from the commands loaded so far (which depends on what
                    # ran before in this process); the suggestion is from every name.
                    message = message.split(" Did you mean", 1)[0]
                    close = difflib.get_close_matches(args[0], list(COMMAND_MODULES))
                    if close:
                        names = ", ".join(repr(name) for name in close)
                        message = f"{message.rstrip('.')}. Did you mean {names}?"
                    err.message = message  # type: ignore[attr-defined]
                raise
        return super().resolve_command(ctx, args)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        """As typer's, except that a usage mistake (an unknown command or option, a value
        of the wrong type, a missing argument) is one line on stderr, exit 2, where typer
        draws a box of several lines."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except Exception as err:
            if not _is_usage_mistake(err):
                raise
            message = " ".join(err.format_message().split()).rstrip(".")  # type: ignore[attr-defined]
            context = getattr(err, "ctx", None)
            where = f"; see {_command_path(context)} --help" if context is not None else ""
            err_console.print(
                f"[red]error:[/red] {message}{where}", highlight=False, soft_wrap=True
            )
            sys.exit(err.exit_code)  # type: ignore[attr-defined]
        sys.exit(code if isinstance(code, int) else 0)

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


def _command_path(context: Any) -> str:
    """``gpumosaic reproduce``: the command as the user knows it, whatever started it
    (``python -m gpumosaic`` names the root otherwise)."""
    names = []
    while context.parent is not None:
        names.append(context.info_name)
        context = context.parent
    return " ".join(["gpumosaic", *reversed(names)])


def _is_usage_mistake(err: Exception) -> bool:
    """A click exception (from typer's copy of click or from click itself) that says what
    the user typed wrong; ``Abort`` (Ctrl-C at a prompt) is not one."""
    return callable(getattr(err, "format_message", None)) and isinstance(
        getattr(err, "exit_code", None), int
    )


class _Listed(TyperCommand):
    """A command as ``gpumosaic --help`` lists it, before its module is imported."""


app = typer.Typer(
    rich_markup_mode=None,  # click's help: it wraps at any width where rich's cut defaults
    cls=LazyCommandGroup,
    name="gpumosaic",
    help="Simulate, compare and serve GPU-cluster scheduling with shared GPUs: the same "
    "policies and placements drive the simulator, the round service on Ray (serve), the "
    "Kubernetes extender and the GPU time-sharing runtime (share).",
    no_args_is_help=True,
    add_completion=True,  # --install-completion, --show-completion (issue 27)
    pretty_exceptions_enable=False,
)
err_console = Console(stderr=True)


def announce(line: str) -> None:
    """A line of news on stderr (what a rerun reuses, ...), as written."""
    err_console.print(line, highlight=False, soft_wrap=True)


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
    """Turn an InputError (a user mistake) into one red line on stderr and exit code 2,
    and Ctrl-C into one line saying what was kept (``Interrupted``), exit code 130."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from gpumosaic.cli.bounds import check_bounds

        try:
            check_bounds(kwargs)
            return func(*args, **kwargs)
        except InputError as err:
            err_console.print(
                f"[red]error:[/red] {markup_safe(err)}", highlight=False, soft_wrap=True
            )
            sys.exit(2)
        except UnicodeDecodeError as err:
            # A binary file where text was expected, read by a path without its own check.
            err_console.print(
                f"[red]error:[/red] a file given is not text (UTF-8): byte {err.start} "
                f"({err.reason}); name a CSV, YAML or TOML file",
                highlight=False,
                soft_wrap=True,
            )
            sys.exit(2)
        except Interrupted as err:
            err_console.print(f"[yellow]{err.message}[/yellow]", highlight=False, soft_wrap=True)
            sys.exit(130)
        except KeyboardInterrupt:
            err_console.print("[yellow]interrupted[/yellow]: nothing was kept", highlight=False)
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


def check_out_dir(path: Path | None, flag: str = "--out") -> None:
    """Refuse an output folder that cannot be one, before any work is done: a file, a
    folder that cannot be created (under a file, on a read-only or pseudo file system) or
    one that cannot be written. The check creates the folder and a file in it, as the
    command will, then removes what it created (an existing folder stays as it was)."""
    if path is None:
        return
    if path.exists() and not path.is_dir():
        raise InputError(
            "is a file, not a folder: name a new or existing folder", field=flag, value=path
        )
    missing = [p for p in (path, *path.parents) if not p.exists()]
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path, prefix=".gpumosaic-write-check-"):
            pass
    except OSError as err:
        reason = err.strerror or str(err)
        raise InputError(
            f"cannot create or write this folder ({reason})", field=flag, value=path
        ) from None
    finally:
        for created in missing:  # deepest first: only the folders this check made
            with contextlib.suppress(OSError):
                created.rmdir()


# The fill replay's --inflate: up to 10 x the cluster's GPUs (the papers stop at 1.3; far
# beyond it every placement has long been full and the replay only costs time).
MAX_INFLATE = 10.0
# --workers: parallel processes, at most this many (a sanity bound, not a tuning).
MAX_WORKERS = 1024


def check_number(
    value: float,
    flag: str,
    *,
    above: float | None = None,
    at_least: float | None = None,
    at_most: float | None = None,
) -> None:
    """A number read from a flag: finite, and within the bounds given (one line naming the
    flag otherwise)."""
    bounds = []
    if above is not None:
        bounds.append(f"> {above:g}")
    if at_least is not None:
        bounds.append(f">= {at_least:g}")
    if at_most is not None:
        bounds.append(f"<= {at_most:g}")
    wanted = "a finite number" + (" " + " and ".join(bounds) if bounds else "")
    if (
        not math.isfinite(value)
        or (above is not None and not value > above)
        or (at_least is not None and not value >= at_least)
        or (at_most is not None and not value <= at_most)
    ):
        raise InputError(f"must be {wanted}", field=flag, value=value)


def check_seed(seed: int, flag: str = "--seed") -> None:
    if seed < 0:
        raise InputError("must be a whole number >= 0", field=flag, value=seed)
