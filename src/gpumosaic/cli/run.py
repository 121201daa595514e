"""``gpumosaic run EXPERIMENT.toml``: run a study declared in an experiment file (or a
shipped preset) into a result store, resuming where an earlier run stopped."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from gpumosaic.cli.app import announce, app, check_out_dir, err_console, user_errors
from gpumosaic.cli.progress import counter_bar
from gpumosaic.cli.tables import show
from gpumosaic.errors import InputError, unknown_name


@app.command()
@user_errors
def run(
    experiment: Annotated[
        Path | None, typer.Argument(help="experiment file (TOML); see docs/experiments.md")
    ] = None,
    preset: Annotated[
        str | None, typer.Option(help="a shipped experiment instead of a file (see --list)")
    ] = None,
    list_presets: Annotated[
        bool, typer.Option("--list", help="list the shipped experiments and exit")
    ] = False,
    out: Annotated[
        Path | None, typer.Option(help="result folder (default: runs/NAME); reruns resume")
    ] = None,
    executor: Annotated[
        str, typer.Option(help="local (worker processes) or ray (a Ray task per run)")
    ] = "local",
    workers: Annotated[int, typer.Option(help="parallel runs (default: all cores)")] = 0,
    json_out: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite",
            help="replace the runs of another experiment stored in OUT (refused without it)",
        ),
    ] = False,
) -> None:
    """Run every point of an experiment's grid not yet in the result folder."""
    from gpumosaic.experiments.study.file import load_experiment
    from gpumosaic.experiments.study.presets import preset_path

    if executor not in ("local", "ray"):
        raise unknown_name("executor", executor, ("local", "ray"), field="--executor")
    if list_presets:
        _list(json_out)
        return
    if (experiment is None) == (preset is None):
        raise InputError("give an experiment file or --preset NAME (--list shows them)")
    path = preset_path(preset) if preset is not None else experiment
    assert path is not None
    study = load_experiment(path)
    folder = out or Path("runs") / study.name
    check_out_dir(folder)
    # The runner (result store: pyarrow; the simulators) only once the file is valid.
    from gpumosaic.cli.out_folder import claim_for, locked_out
    from gpumosaic.experiments.parallel import default_workers
    from gpumosaic.experiments.study.execute import execute

    n_workers = workers if workers > 0 else default_workers()
    with (
        locked_out(folder),
        counter_bar(not json_out and sys.stderr.isatty(), f"{study.name} runs") as update,
    ):
        claim_for(folder, study.text, overwrite)
        outcome = execute(
            study,
            folder,
            executor,
            n_workers,
            lambda done, total: update(done, total),
            announce=None if json_out else announce,
        )
    if json_out:
        payload = {
            "experiment": study.name,
            "out": str(folder),
            "planned": outcome.planned,
            "skipped": outcome.skipped,
            "ran": outcome.ran,
            "failed": [{"run_id": f.run_id, "error": f.error} for f in outcome.failed],
            "elapsed_s": round(outcome.elapsed_s, 3),
        }
        typer.echo(json.dumps(payload))
    else:
        console = Console()
        console.print(
            f"{study.name}: {outcome.planned} runs planned, reused {outcome.skipped} stored "
            f"runs, {outcome.ran} ran in {outcome.elapsed_s:.1f} s -> {folder}"
        )
        if not outcome.failed:
            console.print(f"next: gpumosaic report {folder}   |   gpumosaic query {folder} SQL")
    if outcome.failed:
        for error in dict.fromkeys(f.error for f in outcome.failed):
            count = sum(f.error == error for f in outcome.failed)
            err_console.print(f"[red]error:[/red] {count} run(s) failed: {error}", highlight=False)
        raise typer.Exit(1)


def _list(json_out: bool) -> None:
    from gpumosaic.experiments.study.file import load_experiment
    from gpumosaic.experiments.study.presets import PRESETS, preset_path

    studies = [load_experiment(preset_path(name), check_grid=False) for name in PRESETS]
    if json_out:
        rows = [
            {
                "name": s.name,
                "kind": s.kind.name,
                "runs": len(s.runs()),
                "description": s.description,
            }
            for s in studies
        ]
        typer.echo(json.dumps(rows))
        return
    table = Table(title="shipped experiments: gpumosaic run --preset NAME")
    for column in ("name", "kind", "runs", "description"):
        table.add_column(column, justify="right" if column == "runs" else "left")
    for s in studies:
        table.add_row(s.name, s.kind.name, str(len(s.runs())), s.description)
    show(table, ("name",))
