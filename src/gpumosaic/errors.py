"""User-facing error types. ``InputError``: a user mistake in a file or an argument; it
names the file, the row and the field (or the flag)."""

from __future__ import annotations

from pathlib import Path


class InputError(ValueError):
    """A user mistake in an input file or argument. The CLI prints ``str(err)`` on one
    line and exits non-zero; it is never shown as a traceback."""

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        row: int | None = None,
        field: str | None = None,
    ) -> None:
        self.path = None if path is None else str(path)
        self.row = row
        self.field = field
        self.message = message
        where = []
        if self.path is not None:
            where.append(self.path)
        if row is not None:
            where.append(f"row {row}")
        if field is not None:
            where.append(f"field {field!r}")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)
