"""Text that came from elsewhere (a job's name or reason, a server's message, a process's
name in the share daemon), made safe to print for a person: the one function every
human-readable printer of the CLI passes such text through.

Control characters (C0, DEL, C1, so ANSI escape sequences too), line and paragraph
separators and bidirectional overrides are written as escapes (``\\x1b``, ``\\n``,
``\\u202e``), so a job name cannot move the cursor, recolour the terminal, forge a line
or reverse what follows. ``cell`` and ``markup_safe`` also keep rich from reading the
text as markup (``[red]``). ``--json`` output is JSON and needs none of this.
"""

from __future__ import annotations

import re

from rich.markup import escape
from rich.text import Text

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_UNSAFE_KEEP_LINES = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_one(match: re.Match[str]) -> str:
    c = match.group()
    if c in _NAMED:
        return _NAMED[c]
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def shown(value: object, *, keep_lines: bool = False) -> str:
    """``value`` as text with every control character escaped (``keep_lines``: newlines
    and tabs stay, for a log tail)."""
    pattern = _UNSAFE_KEEP_LINES if keep_lines else _UNSAFE
    return pattern.sub(_escape_one, str(value))


def cell(value: object) -> Text:
    """A rich table cell: escaped, and never read as markup."""
    return Text(shown(value))


def markup_safe(value: object) -> str:
    """Escaped text to put inside a rich markup string (``f"[red]error:[/red] {...}"``)."""
    return escape(shown(value))
