"""Launch failures are attempts (issue 23, item 3): a command that cannot start, a process
that exits before its first lease call or goes silent is a failed attempt with its reason
in the job's log; after its retries the job is failed, never done."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from builders import FakeClock, cluster

from gpumosaic.mechanisms.rounds.live.driver import RoundDriver
from gpumosaic.run.serve import ServeDescription, build_decider
from gpumosaic.runtime.executors.contract import ExitReport, LaunchSpec
from gpumosaic.runtime.executors.ray import CANNOT_START_CODE, LeaseProcess
from gpumosaic.runtime.executors.warm_ray import NodeLauncher
from gpumosaic.runtime.jobs.submission import JobSubmission
from gpumosaic.runtime.leases import LeaseTable
from gpumosaic.runtime.state.store import Store
from gpumosaic.runtime.supervisor.config import DriverConfig

ENV = {"GPUMOSAIC_LEASE_ID": "L", "GPUMOSAIC_RANK": "0"}


@pytest.mark.parametrize(
    ("command", "workdir", "why"),
    [
        ("/no/such/binary --flag", "", "No such file"),
        ("exit 3", "", "No such file"),  # a shell builtin without a shell
        ("true", "/no/such/workdir", "No such file"),
        ("echo a\0b", "", "null byte"),
        ("echo " + "x" * 10_000_000, "", "over the 131,072-byte limit"),
        ("/tmp", "", "Permission denied"),  # a directory
    ],
    ids=["no-binary", "builtin", "no-workdir", "nul-byte", "10mb", "directory"],
)
def test_a_command_that_cannot_start_answers_127_with_its_reason_in_the_log(
    tmp_path: Path, command: str, workdir: str, why: str
) -> None:
    log = tmp_path / "job.log"
    proc = LeaseProcess(command, workdir, ENV, str(log))
    assert proc.pid() is None
    code, tail = proc.wait()
    assert code == CANNOT_START_CODE
    assert "cannot start" in tail and why in tail
    assert len(log.read_bytes()) < 2_000  # a 10 MB command is not copied into the log
    proc.terminate(0.1)  # nothing to stop: no error


def test_the_warm_launcher_reports_a_start_failure_as_an_exit(tmp_path: Path) -> None:
    launcher = NodeLauncher()
    assert launcher.start("L/0", "/no/such/binary", "", ENV, str(tmp_path / "j.log")) is None
    exits = launcher.exits(5.0)
    assert len(exits) == 1
    key, code, tail, detail = exits[0]
    assert (key, code) == ("L/0", CANNOT_START_CODE)
    assert detail.startswith("cannot start") and "No such file" in tail


def test_the_warm_launcher_runs_and_stops_a_process(tmp_path: Path) -> None:
    launcher = NodeLauncher()
    env = {**ENV}
    sleeper = f"{sys.executable} -c 'import time; time.sleep(60)'"
    assert launcher.start("L/0", sleeper, "", env, str(tmp_path / "j.log")) is not None
    assert launcher.start("M/0", "true", "", env, str(tmp_path / "k.log")) is not None
    exits = launcher.exits(10.0)
    assert [(k, c) for k, c, _, _ in exits] == [("M/0", 0)]
    launcher.terminate("L/0", 5.0)
    exits = launcher.exits(10.0)
    assert [(k, c) for k, c, _, _ in exits] == [("L/0", -15)]  # SIGTERM


@dataclass
class SilentExecutor:
    """Processes that start and then never call the lease API (``sleep 1000``)."""

    stopped: list[str] = field(default_factory=list)
    launched: list[str] = field(default_factory=list)

    def launch(self, spec: LaunchSpec) -> None:
        self.launched.append(spec.lease_id)

    def stop(self, lease_id: str, grace_s: float) -> None:
        self.stopped.append(lease_id)

    def poll(self) -> list[ExitReport]:
        out = [ExitReport(lease, -15, False, "") for lease in self.stopped]
        self.stopped.clear()
        return out

    def reap(self, lease_id: str, ranks: int) -> None: ...

    def shutdown(self) -> None: ...


def silent_driver(tmp_path: Path, **config: float) -> tuple[RoundDriver, Store, FakeClock]:
    live = cluster("v100:1")
    clock = FakeClock()
    store = Store(tmp_path / "state.db")
    table = LeaseTable(store, clock)
    decider, priors = build_decider(ServeDescription(round_s=1000.0), live)
    driver = RoundDriver(
        store,
        table,
        SilentExecutor(),
        decider,
        live,
        priors,
        DriverConfig(round_s=1000.0, data_dir=str(tmp_path), **config),  # type: ignore[arg-type]
        clock=clock,
    )
    return driver, store, clock


def test_a_process_that_never_calls_the_lease_api_is_a_failed_attempt(tmp_path: Path) -> None:
    driver, store, clock = silent_driver(tmp_path, start_grace_s=30.0)
    job = store.add_job(JobSubmission(command="sleep 1000", steps=10), clock(), 1)
    for attempt in (1, 2):
        driver.boundary(clock())
        for _ in range(40):  # 40 s of silence, one tick a second
            clock.t += 1.0
            driver.tick(clock())
        row = store.job(job)
        assert row is not None and row.attempts == attempt
        assert "no lease call within 30 s of its start" in row.reason
        if attempt == 1:
            assert row.state == "queued"
    assert row.state == "failed"  # max_retries 1: two attempts
    log = (tmp_path / "logs" / f"job-{job}.log").read_text()
    assert log.count("no lease call within 30 s") == 2


def test_a_lease_that_stops_reporting_is_a_failed_attempt(tmp_path: Path) -> None:
    driver, store, clock = silent_driver(tmp_path, report_grace_s=20.0)
    job = store.add_job(JobSubmission(command="train", steps=1e6), clock(), 0)
    driver.boundary(clock())
    lease_id = driver.lease_of[job]
    driver.table.init(lease_id, 0, 1234)
    for k in range(10):  # reports for 10 s, then silence
        clock.t += 1.0
        driver.table.report(lease_id, 0, float(k), float(k), False)
        driver.tick(clock())
    assert driver.lease_of.get(job) == lease_id  # still running
    for _ in range(25):
        clock.t += 1.0
        driver.tick(clock())
    row = store.job(job)
    assert row is not None and row.state == "failed"
    assert "no lease call for 20 s after 1 attempt(s)" in row.reason


def test_a_stop_that_overtakes_the_start_still_stops_the_process(tmp_path: Path) -> None:
    launcher = NodeLauncher()
    launcher.terminate("L/0", 5.0)  # the service stopped the lease before its start ran
    sleeper = f"{sys.executable} -c 'import time; time.sleep(60)'"
    assert launcher.start("L/0", sleeper, "", dict(ENV), str(tmp_path / "j.log")) is not None
    exits = launcher.exits(10.0)
    assert [(k, c) for k, c, _, _ in exits] == [("L/0", -15)]
