"""The set-up: ``make`` builds only the groups of the ahead-of-time kernel library not
built for the kernel sources' hash (the demo only its own), into a user cache every clone
shares."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

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
    assert "@$(KERNELS_FOR_DEMO)" in recipes["demo"]  # only the group the demo runs
    assert "@$(KERNELS_IF_MISSING)" in recipes["unit"]
    assert "--if-missing --group placement" in MAKEFILE


def test_if_missing_builds_only_the_groups_not_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from gpumosaic import kernel_aot, kernel_build
    from gpumosaic.cli import app

    asked: list[list[str]] = []
    monkeypatch.setattr(kernel_build, "build", lambda groups, out, workers: asked.append(groups))
    runner = CliRunner()
    out = ["--out", str(tmp_path)]
    first = runner.invoke(app, ["kernels", "--if-missing", *out])
    assert first.exit_code == 0, first.output
    assert asked == [list(kernel_aot.GROUPS)]  # nothing built: every group
    assert "compiling the ahead-of-time kernels" in first.stderr and " s on " in first.stderr
    for path in kernel_aot.aot_paths(tmp_path, "placement")[:2]:  # as a build leaves them
        path.write_bytes(b"")
    runner.invoke(app, ["kernels", "--if-missing", *out])
    assert asked[-1] == ["rounds"]
    runner.invoke(app, ["kernels", "--if-missing", "--group", "placement", *out])
    assert len(asked) == 2  # built: `make demo` leaves it alone
    runner.invoke(app, ["kernels", "--group", "placement", *out])
    assert asked[-1] == ["placement"]  # `make kernels` always builds
    wrong = runner.invoke(app, ["kernels", "--group", "gpu", *out])
    assert wrong.exit_code != 0 and "unknown group 'gpu'" in wrong.output


def test_the_library_is_shared_by_clones_and_keyed_by_the_sources(tmp_path: Path) -> None:
    code = "from gpumosaic.kernel_aot import aot_dir; print(aot_dir())"
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(XDG_CACHE_HOME=str(tmp_path), PYTHONPATH=str(ROOT / "src"))
    where = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    from gpumosaic import kernel_cache

    assert where.startswith(f"{tmp_path}/gpumosaic/aot-{kernel_cache.sources_digest()}-")


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
