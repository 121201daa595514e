"""``gpumosaic explain DIR --job ID``: why a job waited, where it ran, how it ended."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from gpumosaic.cli.app import app, user_errors


@app.command()
@user_errors
def explain(
    folder: Annotated[Path, typer.Argument(help="result folder of gpumosaic run")],
    job: Annotated[int, typer.Option(help="job id (the jobs table's job_id)")],
    run: Annotated[
        str | None, typer.Option(help="run id or a prefix of it (needed when DIR has several)")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """The verdicts over one job's life, from what the run stored."""
    from gpumosaic.experiments.results.explain import explain_job

    story = explain_job(folder, job, run)
    if json_out:
        payload = {
            "run_id": story.run_id,
            "job": story.job_id,
            "verdicts": list(story.verdicts),
            "missing": story.missing,
        }
        typer.echo(json.dumps(payload))
        return
    console = Console()
    console.print(f"job {story.job_id} in run {story.run_id}:", highlight=False)
    for line in story.verdicts:
        console.print(f"  - {line}", highlight=False)
    console.print(f"  ({story.missing})", style="dim", highlight=False)
