"""Command-line entry point: ``gpumosaic COMMAND``. Each command lives in its own module,
imported when the command is run or listed (``app.COMMAND_MODULES``)."""

from __future__ import annotations

from gpumosaic.cli.app import app


def main() -> None:
    app()


__all__ = ["app", "main"]
