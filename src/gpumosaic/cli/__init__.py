"""Command-line entry point: ``gpumosaic COMMAND``. Each command lives in its own module."""

from __future__ import annotations

from gpumosaic.cli.app import app

# Importing a command module registers its commands on ``app``.
from gpumosaic.cli import simulate as _simulate  # noqa: F401  isort: skip
from gpumosaic.cli import compare as _compare  # noqa: F401  isort: skip
from gpumosaic.cli import reproduce as _reproduce  # noqa: F401  isort: skip
from gpumosaic.cli import reproduce_gavel as _reproduce_gavel  # noqa: F401  isort: skip
from gpumosaic.cli import reproduce_gandiva as _reproduce_gandiva  # noqa: F401  isort: skip
from gpumosaic.cli import reproduce_gavel_openb as _reproduce_gavel_openb  # noqa: F401  isort: skip
from gpumosaic.cli import fill as _fill  # noqa: F401  isort: skip
from gpumosaic.cli import serve as _serve  # noqa: F401  isort: skip
from gpumosaic.cli import jobs as _jobs  # noqa: F401  isort: skip
from gpumosaic.cli import extender as _extender  # noqa: F401  isort: skip
from gpumosaic.cli import share as _share  # noqa: F401  isort: skip
from gpumosaic.cli import run as _run  # noqa: F401  isort: skip
from gpumosaic.cli import query as _query  # noqa: F401  isort: skip
from gpumosaic.cli import report as _report  # noqa: F401  isort: skip
from gpumosaic.cli import explain as _explain  # noqa: F401  isort: skip


def main() -> None:
    app()


__all__ = ["app", "main"]
