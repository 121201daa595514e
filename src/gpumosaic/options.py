"""``key=value,key=value`` options, typed: the one parser behind every ``name:options``
spelling on the command line (``--workload gavel:...``, ``--sharing gandiva:...``,
``--sharing nvshare:...``, ``--workload openb:...``, interference models, sweeps).

Options fill a frozen dataclass: each key names one of its fields (or an alias of one),
and the value is converted by the field's type:

- ``bool``: one on/off vocabulary everywhere -- ``on``/``off``, ``true``/``false``,
  ``yes``/``no``, ``1``/``0`` (any case); anything else (``maybe``) is an error;
- ``int``, ``float`` (finite: ``nan`` and ``inf`` are errors, except ``inf`` in a field
  whose metadata says ``INFINITY_ALLOWED``, e.g. ``dataclasses.field(default=1.0,
  metadata={INFINITY_ALLOWED: True})``), ``str``;
- ``Literal["a", "b"]``: one of the listed words;
- ``tuple[int, int]``: a range ``A-B`` (e.g. ``window=4000-5000``);
- ``X | None``: as ``X``.

A bad key or value raises ``OptionError`` (an InputError) whose message names the key
(an unknown key with the nearest known one: "did you mean"),
e.g. ``gandiva option packing: expected on or off (or true/false, yes/no, 1/0), got
'maybe'``; a value the dataclass itself refuses (its ``__post_init__``) names its field.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar, Union

from gpumosaic.errors import InputError

ON_WORDS = ("on", "true", "yes", "1")
OFF_WORDS = ("off", "false", "no", "0")
ON_OFF_HELP = "on or off (or true/false, yes/no, 1/0)"

T = TypeVar("T")

# Field metadata: this float option may be ``inf`` (it means "no limit" there).
INFINITY_ALLOWED = "gpumosaic.options.infinity_allowed"


class OptionError(InputError):
    """A bad ``key=value`` option; the message names the key."""


def parse_on_off(value: str, key: str, what: str = "") -> bool:
    """``on``/``true``/``yes``/``1`` -> True, ``off``/``false``/``no``/``0`` -> False."""
    word = value.strip().lower()
    if word in ON_WORDS:
        return True
    if word in OFF_WORDS:
        return False
    raise OptionError(f"{_label(what)}{key}: expected {ON_OFF_HELP}, got {value!r}")


def split_options(text: str, what: str = "", flag: str | None = None) -> list[tuple[str, str]]:
    """``"a=1, b-c=x"`` -> ``[("a", "1"), ("b_c", "x")]``: keys lower case, ``-`` as ``_``;
    empty items are skipped, an item without ``=`` or without a key is an error."""
    items: list[tuple[str, str]] = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, eq, value = item.partition("=")
        key = key.strip().lower().replace("-", "_")
        if not eq or not key:
            raise OptionError(f"{_label(what)}{item!r}: expected key=value", field=flag)
        items.append((key, value.strip()))
    return items


def parse_options(
    cls: type[T],
    text: str,
    *,
    what: str,
    flag: str | None = None,
    aliases: Mapping[str, str] | None = None,
    base: T | None = None,
    error: type[OptionError] = OptionError,
) -> T:
    """Options ``text`` (``key=value,...``) into the dataclass ``cls`` (or onto ``base``).

    ``what`` names the options in messages (``"gandiva option"``...), ``flag`` the
    command-line flag they came from; ``aliases`` maps short keys to field names (every
    field name is a key too)."""
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    names = [f.name for f in fields]
    infinite = {f.name for f in fields if f.metadata.get(INFINITY_ALLOWED)}
    keys = dict(aliases or {})
    keys.update({name: name for name in names})
    changes: dict[str, Any] = {}
    try:
        for key, value in split_options(text, what, flag):
            name = keys.get(key)
            if name is None:
                known = ", ".join(sorted(keys))
                close = difflib.get_close_matches(key, list(keys), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise OptionError(f"{_label(what)}{key!r} is not an option{hint} (keys: {known})")
            changes[name] = convert(hints[name], value, key, what, name in infinite)
    except OptionError as err:
        raise error(err.message, field=flag) from None
    try:
        if base is not None:
            return dataclasses.replace(base, **changes)  # type: ignore[type-var]
        return cls(**changes)
    except (ValueError, TypeError) as err:
        message = err.message if isinstance(err, InputError) else str(err)
        raise error(f"{what}: {message}" if what else message, field=flag) from None


def convert(kind: Any, value: str, key: str, what: str = "", infinity_allowed: bool = False) -> Any:
    """``value`` as the type ``kind`` (see the module doc); OptionError naming ``key``."""
    origin = typing.get_origin(kind)
    if origin in (Union, types.UnionType):
        members = [a for a in typing.get_args(kind) if a is not type(None)]
        if len(members) == 1:
            return convert(members[0], value, key, what, infinity_allowed)
    if kind is bool:
        return parse_on_off(value, key, what)
    if kind is int or kind is float:
        try:
            number = kind(value)
        except ValueError:
            noun = "a whole number" if kind is int else "a number"
            raise OptionError(f"{_label(what)}{key}: expected {noun}, got {value!r}") from None
        if kind is float and not (math.isfinite(number) or (infinity_allowed and number > 0)):
            raise OptionError(f"{_label(what)}{key}: expected a finite number, got {value!r}")
        return number
    if kind is str:
        return value
    if origin is Literal:
        choices = typing.get_args(kind)
        if value.lower() in choices:
            return value.lower()
        raise OptionError(
            f"{_label(what)}{key}: expected one of {', '.join(choices)}, got {value!r}"
        )
    if origin is tuple and typing.get_args(kind) == (int, int):
        start, dash, end = value.partition("-")
        try:
            if not dash:
                raise ValueError
            return (int(start), int(end))
        except ValueError:
            raise OptionError(
                f"{_label(what)}{key}: expected a range A-B (e.g. 4000-5000), got {value!r}"
            ) from None
    converter: Callable[[str], Any] = kind
    return converter(value)


def _label(what: str) -> str:
    return f"{what} " if what else ""
