"""The package layers of DESIGN.md hold: no import cycle between packages, no import
from a lower layer into a higher one (import-linter's contract in pyproject.toml)."""

from __future__ import annotations

from pathlib import Path

from importlinter.cli import lint_imports

PYPROJECT = Path(__file__).parents[1] / "pyproject.toml"


def test_packages_import_only_from_the_layers_below() -> None:
    assert lint_imports(config_filename=str(PYPROJECT), no_cache=True) == 0
