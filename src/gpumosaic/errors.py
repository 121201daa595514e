"""User-facing error types. ``InputError``: a user mistake in a file or an argument; it
names the file, the row and the field (or the flag)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
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
        value: object = None,
    ) -> None:
        self.path = None if path is None else str(path)
        self.row = row
        self.field = field
        self.value = value
        self.message = message
        where = []
        if self.path is not None:
            where.append(self.path)
        if row is not None:
            where.append(f"row {row}")
        if field is not None and field.startswith("-"):
            # A command-line option: as the user typed it, with the value they gave.
            where.append(field if value is None else f"{field} {_shown(value)}")
        elif field is not None:
            where.append(f"field {field!r}")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)


def _shown(value: object) -> str:
    text = str(value)
    return text if text and " " not in text and "," not in text else repr(text)


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'fgd'?)`` when ``name`` is close to a known name, else ``""``."""
    names = list(known)
    lowered = {n.lower(): n for n in names}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
    return f" (did you mean {lowered[close[0]]!r}?)" if close else ""


def unknown_name(kind: str, name: str, known: Iterable[str], *, field: str | None) -> InputError:
    """The one error for a name that is not registered: the allowed names (in their
    canonical spelling) and the closest one."""
    names = list(dict.fromkeys(known))
    listed = f"known: {', '.join(names)}"
    if field is None:
        return InputError(f"unknown {kind} {name!r}{did_you_mean(name, names)}; {listed}")
    return InputError(
        f"unknown {kind}{did_you_mean(name, names)}; {listed}", field=field, value=name
    )


class BookkeepingError(RuntimeError):
    """An allocation would break an invariant (a bug in the caller, never user input)."""


class Interrupted(Exception):
    """Ctrl-C (or SIGTERM) stopped a long command: ``message`` says what it kept and how to
    resume. The CLI prints it on one line and exits 130."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)
