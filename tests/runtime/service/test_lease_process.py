"""A lease's processes are its whole process group: a job under ``/bin/sh -c`` loses its
shell to SIGTERM at once while the job itself still checkpoints; the lease is over (and
the job's next lease may start) only when the job is gone too (docs/live.md, "measured
rates after a move")."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from gpumosaic.runtime.executors import ray as ray_executor
from gpumosaic.runtime.executors.ray import LeaseProcess, group_alive
from waiting import wait_for

ENV = {"GPUMOSAIC_LEASE_ID": "L", "GPUMOSAIC_RANK": "0"}


def job(tmp_path: Path, body: str) -> str:
    """A Python job run through a shell (its leading ``NAME=value`` needs one)."""
    script = tmp_path / "job.py"
    script.write_text(body)
    return f"X=1 {sys.executable} {script}"


def test_a_stopped_jobs_exit_is_its_own_not_its_shells(tmp_path: Path) -> None:
    marker = tmp_path / "saved"
    command = job(
        tmp_path,
        "import pathlib, signal, sys, time\n"
        "stop = []\n"
        "signal.signal(signal.SIGTERM, lambda *_: stop.append(1))\n"
        "print('ready', flush=True)\n"
        "while not stop:\n"
        "    time.sleep(0.01)\n"
        "time.sleep(0.5)  # its checkpoint\n"
        f"pathlib.Path({str(marker)!r}).write_text('done')\n",
    )
    log = tmp_path / "job.log"
    proc = LeaseProcess(command, "", ENV, str(log))
    assert ray_executor.argv(command)[:2] == ["/bin/sh", "-c"]
    wait_for(log.read_text, 60, "the job to print ready", until=lambda text: "ready" in text)
    pgid = proc.pid()
    assert pgid is not None
    proc.terminate(10.0)
    proc.wait()
    assert marker.read_text() == "done"  # the job finished its checkpoint first
    assert not group_alive(pgid)


def test_a_process_left_behind_is_killed_after_a_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ray_executor, "GROUP_EXIT_GRACE_S", 0.3)
    log = tmp_path / "job.log"
    proc = LeaseProcess("sleep 3600 & exit 0", "", ENV, str(log))
    pgid = proc.pid()
    assert pgid is not None
    # The wait ends (the left-behind sleep is killed), far before the sleep would.
    result: list[tuple[int, str]] = []
    waiter = threading.Thread(target=lambda: result.append(proc.wait()), daemon=True)
    waiter.start()
    waiter.join(120)
    assert result, "the lease's wait did not end: the process left behind was not killed"
    code, tail = result[0]
    assert code == 0
    assert not group_alive(pgid)
    assert "other processes outlived it" in tail


def test_a_job_that_ignores_sigterm_is_killed_at_the_grace_periods_end(tmp_path: Path) -> None:
    command = job(
        tmp_path,
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('ready', flush=True)\n"
        "time.sleep(3600)\n",
    )
    log = tmp_path / "job.log"
    proc = LeaseProcess(command, "", ENV, str(log))
    wait_for(log.read_text, 60, "the job to print ready", until=lambda text: "ready" in text)
    result: list[tuple[int, str]] = []
    waiter = threading.Thread(target=lambda: result.append(proc.wait()), daemon=True)
    waiter.start()
    proc.terminate(0.5)
    waiter.join(120)  # a bound, far from the grace period's 0.5 s (and the job's hour)
    assert result, "the job that ignores SIGTERM was not killed at the grace period's end"
    assert proc.pid() is not None and not group_alive(proc.pid())  # type: ignore[arg-type]
