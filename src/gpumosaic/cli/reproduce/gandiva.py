"""``gpumosaic reproduce gandiva``: Gandiva's mechanisms on Gavel's generated workloads,
packing and migration on vs off (``experiments/reproductions/gandiva.py``)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated

import typer

from gpumosaic.cli.app import user_errors
from gpumosaic.cli.reproduce.group import reproduce_app


@reproduce_app.command("gandiva", epilog="Example: gpumosaic reproduce gandiva --quick --json")
@user_errors
def gandiva(
    quick: Annotated[bool, typer.Option("--quick", help="smaller windows (about 15 s)")] = False,
    seed: Annotated[int, typer.Option(help="seed of the generated workloads")] = 0,
    json_out: Annotated[
        bool, typer.Option("--json", help="print one JSON object: rows and packing gains")
    ] = False,
) -> None:
    """Gandiva (OSDI'18) packing and migration on 36:36:36 and 8 x V100 bursts (2.5 min)."""
    # Imported here: the ``reproduce`` group registers this command for every reproduce
    # call, and the study's modules load numpy (a mistake's line stays light).
    from gpumosaic.experiments.reproductions.gandiva import (
        QUICK_SCENARIOS,
        SCENARIOS,
        evaluate,
        packing_gains,
        render,
    )

    rows = evaluate(QUICK_SCENARIOS if quick else SCENARIOS, seed=seed)
    if json_out:
        gains = [asdict(g) for g in packing_gains(rows)]
        print(json.dumps({"rows": [asdict(r) for r in rows], "packing_gains": gains}, indent=1))
        return
    render(rows, seed)
