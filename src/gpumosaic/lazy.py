"""Packages whose names load on first use (PEP 562), so that importing a package for
one light module (a spec's grammar, a value type) does not pay for its heavy ones."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: ``where`` maps each name to the
    submodule that defines it, imported when the name is first read."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    return __getattr__
