"""SQL over a result folder with DuckDB: ``runs`` is runs.parquet; ``jobs``, ``timeline``
and ``placements`` are every run's tables of that name (each row carries its run_id)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpumosaic.errors import InputError
from gpumosaic.experiments.results.store import RUNS_TABLE, TABLES, check_store


def connect(folder: Path) -> Any:
    """A DuckDB connection with the folder's tables as views."""
    try:
        import duckdb
    except ImportError:
        raise InputError("querying needs DuckDB: pip install 'gpumosaic[query]'") from None
    check_store(folder)
    con = duckdb.connect()
    con.execute(f"CREATE VIEW runs AS SELECT * FROM read_parquet('{_quoted(folder / RUNS_TABLE)}')")
    for name in TABLES:
        files = sorted((folder / "runs").glob(f"*/{name}.parquet"))
        if files:
            listed = ", ".join(f"'{_quoted(f)}'" for f in files)
            con.execute(
                f"CREATE VIEW {name} AS SELECT * FROM read_parquet([{listed}], union_by_name=true)"
            )
    return con


def run_query(folder: Path, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    import duckdb

    con = connect(folder)
    try:
        cursor = con.execute(sql)
    except duckdb.Error as err:
        raise InputError(f"SQL: {str(err).splitlines()[0]}", field="SQL") from None
    if cursor.description is None:
        return [], []
    columns = [d[0] for d in cursor.description]
    return columns, cursor.fetchall()


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")
