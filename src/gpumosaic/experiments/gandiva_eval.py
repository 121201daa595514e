"""Moved to the command line: ``gpumosaic reproduce gandiva`` (same options, see its
``--help``). ``python -m gpumosaic.experiments.gandiva_eval ARGS`` runs that command."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> None:
    from gpumosaic.cli import app

    args = list(sys.argv[1:] if argv is None else argv)
    print(f"(running: gpumosaic reproduce gandiva {' '.join(args)})", file=sys.stderr)
    app(["reproduce", "gandiva", *args], prog_name="gpumosaic")


if __name__ == "__main__":
    main()
