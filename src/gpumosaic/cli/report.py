"""``gpumosaic report DIR``: DIR/report.html, one self-contained page of a study."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from gpumosaic.cli.app import app, user_errors


@app.command()
@user_errors
def report(
    folder: Annotated[Path, typer.Argument(help="result folder of gpumosaic run")],
    json_out: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """Write DIR/report.html: the grid with 95% intervals, the reference figures, ours
    beside the reference, a GPU occupancy mosaic and why jobs waited (opens offline)."""
    from gpumosaic.experiments.report.page import build_report

    outcome = build_report(folder)
    if json_out:
        payload = {
            "report": str(outcome.path),
            "runs": outcome.runs,
            "figures": outcome.figures,
            "bytes": outcome.bytes,
            "elapsed_s": round(outcome.elapsed_s, 3),
        }
        typer.echo(json.dumps(payload))
        return
    Console().print(
        f"wrote {outcome.path} ({outcome.runs} runs, {outcome.figures} figures, "
        f"{outcome.bytes / 1e6:.1f} MB) in {outcome.elapsed_s:.1f} s"
    )
