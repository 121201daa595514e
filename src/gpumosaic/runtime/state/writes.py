"""A transaction's writes, noted as they are made (``Store._tx``), so that a decision
whose transaction fails because the state cannot be written is kept whole, in order, and
written first by the next transaction (docs/live.md, "State file")."""

from __future__ import annotations

import contextlib
import sqlite3
from typing import cast

Statement = tuple[str, tuple[object, ...] | list[tuple[object, ...]], bool]


class _NoRows:
    """What a write that was kept instead of run returns (no decision reads it)."""

    rowcount = 0
    lastrowid = None

    def fetchone(self) -> None:
        return None

    def fetchall(self) -> list[object]:
        return []


class Writes:
    """The connection inside one transaction: every write is noted, so that a decision
    whose transaction fails can be written again, whole and in order, later. Once a
    statement failed (SQLite may then have rolled the transaction back by itself), the
    writes that follow are only noted, never run: nothing is committed piecemeal."""

    def __init__(self, db: sqlite3.Connection, kept: list[Statement], *, keep: bool) -> None:
        self.db = db
        self.kept = kept
        self.keep = keep
        self.statements: list[Statement] = list(kept)
        self.failed: sqlite3.OperationalError | None = None

    def begin(self) -> None:
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as err:
            if not self.keep:
                raise
            self.failed = err

    def replay(self) -> None:
        for sql, args, many in self.kept:
            self._run(sql, args, many)

    def commit(self) -> None:
        if self.failed is not None:
            with contextlib.suppress(sqlite3.Error):
                self.db.execute("ROLLBACK")
            return
        try:
            self.db.execute("COMMIT")
        except sqlite3.Error:
            # A failed COMMIT (disk full, I/O error) may leave the transaction open:
            # end it, so the next write starts clean once the cause is gone.
            with contextlib.suppress(sqlite3.Error):
                self.db.execute("ROLLBACK")
            raise

    def _run(self, sql: str, args: object, many: bool) -> object:
        if self.failed is not None:
            return _NoRows()
        try:
            if many:
                return self.db.executemany(sql, cast(list[tuple[object, ...]], args))
            return self.db.execute(sql, cast(tuple[object, ...], args))
        except sqlite3.OperationalError as err:
            if not self.keep:
                raise
            self.failed = err
            return _NoRows()

    def execute(self, sql: str, args: tuple[object, ...] | list[object] = ()) -> object:
        if sql.lstrip()[:6].upper() == "SELECT":
            return self.db.execute(sql, args)
        self.statements.append((sql, tuple(args), False))
        return self._run(sql, tuple(args), False)

    def executemany(self, sql: str, rows: object) -> object:
        listed = [tuple(r) for r in cast(list[tuple[object, ...]], rows)]
        self.statements.append((sql, listed, True))
        return self._run(sql, listed, True)
