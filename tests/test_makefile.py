"""make's kernel step: make asks ``gpumosaic kernels --if-missing`` (which builds only the
groups not built for the kernel sources' hash: tests/cli/test_setup.py), a failed build is
said and make goes on and retries next time; the demo builds only its group; the fast lane
exists beside ``make test``. Runs make on a copy of the Makefile with a stand-in for
``gpumosaic`` (no install, no compiler)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from waiting import wait_for

MAKEFILE = Path(__file__).parents[1] / "Makefile"


def _tree(tmp_path: Path, kernels_exit: int) -> Path:
    """A copy of the Makefile with a stand-in ``gpumosaic`` that exits ``kernels_exit``."""
    shutil.copy(MAKEFILE, tmp_path / "Makefile")
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text("")
    earlier = time.time() - 60
    os.utime(pyproject, (earlier, earlier))  # installed after pyproject.toml: up to date
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    _stand_in(bin_dir / "gpumosaic", kernels_exit)
    (tmp_path / ".venv" / ".installed-run").write_text("")
    (tmp_path / ".venv" / ".installed-dev").write_text("")
    return tmp_path


def _stand_in(script: Path, exit_code: int) -> None:
    script.write_text(f'#!/bin/sh\necho ran {script.name} "$@"\nexit {exit_code}\n')
    script.chmod(0o755)


def _make(tree: Path, *targets: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "-C", str(tree), *targets], capture_output=True, text=True, timeout=60
    )


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_a_failed_kernel_build_is_said_and_retried(tmp_path: Path) -> None:
    tree = _tree(tmp_path, kernels_exit=1)
    first = _make(tree, "kernels-if-missing")
    assert first.returncode == 0  # the JIT still runs the kernels: make goes on
    assert "ran gpumosaic kernels --if-missing" in first.stdout
    assert "did not build" in first.stderr and "tries again" in first.stderr
    again = _make(tree, "kernels-if-missing")
    assert "ran gpumosaic kernels --if-missing" in again.stdout  # asked again
    _stand_in(tree / ".venv" / "bin" / "gpumosaic", 0)
    built = _make(tree, "kernels-if-missing")
    assert built.returncode == 0 and "did not build" not in built.stderr


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_the_demo_builds_only_the_placement_kernels(tmp_path: Path) -> None:
    tree = _tree(tmp_path, kernels_exit=0)
    demo = _make(tree, "demo").stdout
    assert "ran gpumosaic kernels --if-missing --group placement" in demo
    assert "ran gpumosaic compare" in demo
    unit = _make(tree, "-n", "unit").stdout
    assert "gpumosaic kernels --if-missing ||" in unit  # every group


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_check_is_the_fast_lane_and_make_test_runs_everything(tmp_path: Path) -> None:
    tree = _tree(tmp_path, kernels_exit=0)
    check = _make(tree, "-n", "check").stdout
    assert 'pytest -m "not slow"' in check and "ruff check" in check and "mypy" in check
    unit = _make(tree, "-n", "unit").stdout
    assert "pytest" in unit and "not slow" not in unit
    assert "--cov" in unit and "-n 2 --dist loadgroup" in unit  # both cores; a coverage figure


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_test_under_load_runs_the_suite_three_times_beside_four_busy_processes(
    tmp_path: Path,
) -> None:
    tree = _tree(tmp_path, kernels_exit=0)
    # The stand-in python: a busy process records its pid and sleeps in its place; the
    # suite records how many busy processes are alive while it runs.
    (tree / ".venv" / "bin" / "python").write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        f'  *"while True"*) echo $$ >> {tree}/busy; exec sleep 120;;\n'
        # (the busy processes start in the background: wait, bounded, until all four did)
        f"  *pytest*) i=0; while [ $(cat {tree}/busy 2>/dev/null | wc -l) -lt 4 ] &&"
        f" [ $i -lt 2400 ]; do sleep 0.05; i=$((i+1)); done;"
        f" n=0; for p in $(cat {tree}/busy); do kill -0 $p && n=$((n+1)); done;"
        f" echo $n >> {tree}/alive;;\n"
        "esac\n"
    )
    (tree / ".venv" / "bin" / "python").chmod(0o755)
    _stand_in(tree / ".venv" / "bin" / "coverage", 0)
    done = _make(tree, "test-under-load")
    assert done.returncode == 0, done.stderr
    assert (tree / "alive").read_text().split() == ["4", "4", "4"]  # three runs, each loaded
    assert done.stdout.count("passed in") == 3
    for pid in (tree / "busy").read_text().split():  # the busy processes end with make
        wait_for(lambda pid=pid: not _running(pid), 120, f"busy process {pid} to end")


def _running(pid: str) -> bool:
    """Alive and not a zombie (a zombie is dead: only its exit status is left)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False
