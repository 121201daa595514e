"""Shipped experiment files: every reproduction as data (``gpumosaic run --preset NAME``)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from gpumosaic.errors import InputError

PRESETS = ("fgd-openb", "gavel-static", "gavel-continuous", "nvshare", "gandiva", "spatial-sharing")


def preset_path(name: str) -> Path:
    """The shipped file of preset ``name`` (a path inside the installed package)."""
    if name not in PRESETS:
        raise InputError(f"unknown preset {name!r} (known: {', '.join(PRESETS)})", field="--preset")
    return Path(str(resources.files(__package__) / f"{name}.toml"))
