"""Where a key sits in a TOML text: tomllib parses without positions, so the line of a key
(for error messages that name file, line and key) is found by reading the text once."""

from __future__ import annotations

import re
from collections.abc import Sequence

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(
    r"""^\s*((?:"[^"]*"|'[^']*'|[A-Za-z0-9_\-]+)(?:\s*\.\s*(?:"[^"]*"|'[^']*'|[A-Za-z0-9_\-]+))*)\s*="""
)

Loc = Sequence[str | int]


def _parts(dotted: str) -> tuple[str, ...]:
    return tuple(p.strip().strip("\"'") for p in dotted.split("."))


class KeyLines:
    """Line (1-based) of every table header and key of a TOML text, by key path.

    An array of tables ``[[name]]`` gets its index in the path, as in pydantic's error
    locations: ``("reference", 2, "value")`` is the key ``value`` of the third
    ``[[reference]]``. A key inside a multi-line array or inline table resolves to the
    line of the key that holds it.
    """

    def __init__(self, text: str) -> None:
        self._lines: dict[tuple[str | int, ...], int] = {}
        counts: dict[tuple[str, ...], int] = {}
        table: tuple[str | int, ...] = ()
        depth = 0  # open brackets/braces of a value that spans lines
        for number, line in enumerate(text.splitlines(), start=1):
            if depth > 0:
                depth += _balance(line)
                continue
            header = _HEADER.match(line)
            if header:
                name = _parts(header.group(2))
                if header.group(1) == "[[":
                    index = counts.get(name, -1) + 1
                    counts[name] = index
                    table = (*name, index)
                else:
                    table = name
                self._lines.setdefault(table, number)
                continue
            key = _KEY.match(line)
            if key:
                self._lines.setdefault((*table, *_parts(key.group(1))), number)
                depth = max(0, _balance(line[key.end() :]))

    def line(self, loc: Loc) -> int | None:
        """The line of ``loc``, or of its nearest enclosing key or table that is written."""
        path = tuple(loc)
        for n in range(len(path), 0, -1):
            found = self._lines.get(path[:n])
            if found is not None:
                return found
        return None


def _balance(text: str) -> int:
    """Open minus closed brackets and braces outside strings and comments."""
    depth = 0
    quote = ""
    for ch in text:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            break
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
    return depth


def dotted(loc: Loc) -> str:
    """``("grid", "placement", 2)`` -> ``grid.placement[2]``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out
