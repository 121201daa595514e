"""``gpumosaic query DIR "SQL"``: SQL (DuckDB) over a result folder."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from gpumosaic.cli.app import app, user_errors
from gpumosaic.cli.tables import show


@app.command()
@user_errors
def query(
    folder: Annotated[Path, typer.Argument(help="result folder of gpumosaic run")],
    sql: Annotated[str, typer.Argument(help="SQL over runs, jobs, timeline, placements")],
    json_out: Annotated[
        bool, typer.Option("--json", help="print the rows as a JSON list of objects")
    ] = False,
) -> None:
    """Query a result folder with SQL. Tables: runs (one row per run: grid columns and
    summary metrics), jobs, timeline and placements (every run's, with run_id).

    Example: gpumosaic query runs/spatial-sharing
    "SELECT placement, avg(avg_jct_s) FROM runs GROUP BY placement"
    """
    from gpumosaic.experiments.results.query import run_query

    columns, rows = run_query(folder, sql)
    if json_out:
        typer.echo(json.dumps([dict(zip(columns, r, strict=True)) for r in rows], default=_json))
        return
    table = Table(show_edge=False)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(_cell(v) for v in row))
    show(table, [str(c.header) for c in table.columns][:1])


def _json(value: Any) -> Any:
    return str(value)


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)
