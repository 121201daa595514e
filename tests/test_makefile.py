"""make's kernel step: a failed ``gpumosaic kernels`` is said, not stamped, and retried by
the next make; the fast lane exists beside ``make test``. Runs make on a copy of the
Makefile with a stand-in ``gpumosaic`` (no install, no compiler)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

MAKEFILE = Path(__file__).parents[1] / "Makefile"


def _tree(tmp_path: Path, kernels_exit: int) -> Path:
    shutil.copy(MAKEFILE, tmp_path / "Makefile")
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text("")
    earlier = time.time() - 60
    os.utime(pyproject, (earlier, earlier))  # installed after pyproject.toml: up to date
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("python", "gpumosaic"):
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\necho ran {name} "$@"\nexit {kernels_exit}\n')
        script.chmod(0o755)
    (tmp_path / ".venv" / ".installed-run").write_text("")
    return tmp_path


def _make(tree: Path, *targets: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "-C", str(tree), *targets], capture_output=True, text=True, timeout=60
    )


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_a_failed_kernel_build_is_said_not_stamped_and_retried(tmp_path: Path) -> None:
    tree = _tree(tmp_path, kernels_exit=1)
    stamp = tree / ".venv" / ".kernels-built"
    first = _make(tree, ".venv/.kernels-built")
    assert first.returncode == 0  # the JIT still runs the kernels: make goes on
    assert "did not build" in first.stderr and "tries again" in first.stderr
    assert not stamp.exists()
    again = _make(tree, ".venv/.kernels-built")
    assert "ran gpumosaic kernels" in again.stdout  # retried, not skipped
    (tree / ".venv" / "bin" / "gpumosaic").write_text("#!/bin/sh\necho built\nexit 0\n")
    built = _make(tree, ".venv/.kernels-built")
    assert built.returncode == 0 and stamp.exists()
    assert "\nbuilt" not in _make(tree, ".venv/.kernels-built").stdout  # stamped: not rerun


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_check_is_the_fast_lane_and_make_test_runs_everything(tmp_path: Path) -> None:
    tree = _tree(tmp_path, kernels_exit=0)
    check = _make(tree, "-n", "check").stdout
    assert 'pytest -m "not slow"' in check and "ruff check" in check
    unit = _make(tree, "-n", "unit").stdout
    assert "pytest" in unit and "not slow" not in unit
