"""Ctrl-C on the long commands (issue 36): a real process, started as a terminal starts
it (SIGINT at its default), interrupted once a run is stored. It ends with exit 130 and
one line saying what it kept; the same command again reuses what was kept.

The sweeps here are far longer than the bounded waits (hundreds of runs), so a command
that went on with its queue after Ctrl-C would miss the bound."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")
# A bound on every wait; the commands answer Ctrl-C in well under 2 s (measured by hand).
BOUND_S = 120.0


def _interactive_signals() -> None:  # pragma: no cover - runs in the child
    # As a terminal starts a command: a run started by a non-interactive shell ignores
    # SIGINT, and the child would inherit that.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gpumosaic", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
        preexec_fn=_interactive_signals,
    )


def wait_until(
    what: str, seen: Callable[[], object], proc: subprocess.Popen[str], lines: list[str]
) -> None:
    deadline = time.monotonic() + BOUND_S
    while not seen():
        if proc.poll() is not None:
            proc.wait()
            err = "".join(lines)
            raise AssertionError(f"ended ({proc.returncode}) before {what}: {err[-2000:]}")
        assert time.monotonic() < deadline, f"no {what} within {BOUND_S:g} s"
        time.sleep(0.05)


def interrupt(proc: subprocess.Popen[str], lines: list[str]) -> tuple[int, str]:
    """Ctrl-C, then the exit status and all of stderr (``lines``, read as it comes)."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=BOUND_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"still running {BOUND_S:g} s after Ctrl-C") from None
    deadline = time.monotonic() + BOUND_S
    while not (lines and lines[-1] == _EOF):
        assert time.monotonic() < deadline, "stderr did not end after the process"
        time.sleep(0.05)
    return proc.returncode, "".join(lines[:-1])


_EOF = "\0end"


def stderr_lines(proc: subprocess.Popen[str]) -> list[str]:
    """Lines of stderr as they come (one reader thread; ``_EOF`` last): the waits poll
    the list."""
    lines: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
        lines.append(_EOF)

    threading.Thread(target=read, daemon=True).start()
    return lines


COMPARISONS = {
    "placements": ("--placements", "bestfit,fgd", "--workload",
                   "gavel:jobs=20,rate=0,milli=spatial"),
    "policies": ("--policies", "max_min_fairness,fifo", "--rates", "2,4", "--workload",
                 "gavel:jobs=10"),
    "fill": ("--mode", "fill", "--placements", "bestfit,fgd", "--inflate", "0.5"),
}  # fmt: skip


@pytest.mark.parametrize(
    "mode",
    # The policy sweep's rounds (cvxpy) take minutes of start-up on a loaded machine.
    [pytest.param(m, marks=pytest.mark.slow) if m == "policies" else m for m in COMPARISONS],
)
def test_compare_stops_on_ctrl_c_keeps_its_runs_and_a_rerun_reuses_them(
    tmp_path: Path, mode: str
) -> None:
    command = ("compare", *COMPARISONS[mode], "--seeds", "0-199", "--workers", "2")
    command = (*command, "--out", str(tmp_path))
    # Every comparison stores its runs in the folder's result store, as `gpumosaic run`.
    kept, pattern = tmp_path, "runs/*/row.json"
    first = spawn(*command)
    first_lines = stderr_lines(first)
    try:
        wait_until("stored run", lambda: any(kept.glob(pattern)), first, first_lines)
        code, err = interrupt(first, first_lines)
    finally:
        if first.poll() is None:
            first.kill()
    stored = len(list(kept.glob(pattern)))
    assert code == 130, err
    assert err.strip().splitlines()[-1].startswith(f"interrupted: {stored} of "), err
    assert "run the same command again" in err and "Traceback" not in err, err

    second = spawn(*command)
    lines = stderr_lines(second)
    try:
        wait_until("reuse line", lambda: any("reusing" in line for line in lines), second, lines)
        code, _ = interrupt(second, lines)
    finally:
        if second.poll() is None:
            second.kill()
    reused = next(line for line in lines if "reusing" in line)
    assert reused.startswith(f"reusing {stored} of "), reused
    assert code == 130


def test_a_study_stops_on_ctrl_c_and_a_rerun_reuses_its_stored_runs(tmp_path: Path) -> None:
    experiment = tmp_path / "many.toml"
    experiment.write_text(
        '[experiment]\nname = "many"\nkind = "simulate"\n\n[grid]\ncluster = "v100:4"\n'
        'workload = "gavel:jobs=20,rate=0,milli=spatial"\npolicy = "fifo"\n'
        'placement = ["bestfit", "fgd"]\nseed = "0-199"\n'
    )
    out = tmp_path / "out"
    command = ("run", str(experiment), "--out", str(out), "--workers", "2")
    first = spawn(*command)
    first_lines = stderr_lines(first)
    try:
        wait_until("stored run", lambda: any(out.glob("runs/*/row.json")), first, first_lines)
        code, err = interrupt(first, first_lines)
    finally:
        if first.poll() is None:
            first.kill()
    stored = len(list(out.glob("runs/*/row.json")))
    assert code == 130, err
    assert err.strip().splitlines()[-1] == (
        f"interrupted: {stored} of 400 runs are stored in {out}; run the same command again "
        "to run only the rest"
    ), err

    second = spawn(*command)
    lines = stderr_lines(second)
    try:
        wait_until("reuse line", lambda: any("reusing" in line for line in lines), second, lines)
        code, _ = interrupt(second, lines)
    finally:
        if second.poll() is None:
            second.kill()
    reused = next(line for line in lines if "reusing" in line)
    assert reused.startswith(f"reusing {stored} of 400 runs stored in {out}"), reused
    assert code == 130
