"""Issue 28's set-up: ``make`` builds the ahead-of-time kernel library only where the
library for the kernel sources' hash is missing (``make test`` rebuilt what ``make demo``
had just built), and the README's commands name options that exist (test_readme_commands)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAKEFILE = (ROOT / "Makefile").read_text()


def _recipes() -> dict[str, list[str]]:
    """target -> its recipe lines (tab-indented lines under ``target:``)."""
    recipes: dict[str, list[str]] = {}
    current = None
    for line in MAKEFILE.splitlines():
        if line.startswith("\t") and current is not None:
            recipes[current].append(line.strip())
        elif re.match(r"^[^\s#=]+:", line) and ":=" not in line:
            current = line.split(":")[0]
            recipes[current] = []
        elif not line.startswith("\t"):
            current = None
    return recipes


def test_only_make_kernels_always_builds_the_library() -> None:
    recipes = _recipes()
    building = [t for t, lines in recipes.items() if any("gpumosaic kernels" in x for x in lines)]
    assert building == ["kernels"], building  # not the install stamps
    for target in ("demo", "unit"):
        assert "@$(KERNELS_IF_MISSING)" in recipes[target], target


def _check_command() -> str:
    """The Makefile's test for a built library, as the shell runs it (python -c ...)."""
    match = re.search(r'KERNELS_IF_MISSING = \$\(BIN\)/python -c "(.*?)" \|\|', MAKEFILE, re.S)
    assert match is not None
    return match.group(1).replace("\\\n\t", "")


def test_the_check_finds_a_built_library_and_misses_an_absent_one(tmp_path: Path) -> None:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT / "src")}

    def check() -> int:
        done = subprocess.run(
            [sys.executable, "-c", _check_command()], env=env, timeout=60, check=False
        )
        return done.returncode

    assert check() == 1  # nothing built for this hash: make would build it
    code = (
        "from gpumosaic.kernel_aot import aot_paths; p = aot_paths()[0]; "
        "p.parent.mkdir(parents=True); p.write_bytes(b'')"
    )
    subprocess.run([sys.executable, "-c", code], env=env, timeout=60, check=True)
    assert check() == 0  # built: make demo / make test leave it alone


def test_the_license_is_an_spdx_expression_that_setuptools_reads_without_a_warning() -> None:
    """A TOML-table license makes setuptools (>= 77) print a 10-line deprecation banner on
    every install (issue 36)."""
    import tomllib
    import warnings

    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["license"] == "Apache-2.0"
    assert "setuptools>=77" in project["build-system"]["requires"]  # reads SPDX strings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dist = apply_configuration(Distribution(), ROOT / "pyproject.toml")
    licensing = [w for w in caught if "license" in str(w.message).lower()]
    assert not licensing, [str(w.message)[:200] for w in licensing]
    assert dist.metadata.license_expression == "Apache-2.0"
