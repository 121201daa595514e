"""``gpumosaic jobs --summary [--json]`` (issue 32): a live service's run so far,
summarised by the simulations' own ``summarize``, with the keys of ``simulate --json``;
a failed and a cancelled job counted as such (never as completed), under the rounds and
under Gandiva. The service runs in this process with the in-process executor on
127.0.0.1; a job whose command is ``fail`` exits 1 before its first lease call."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest
from builders import cluster
from rounds_support import wait_for
from typer.testing import CliRunner

from gpumosaic.cli import app
from gpumosaic.results.result import JobRecord, JobStatus, RunStats, SimResult, TimelineRecorder
from gpumosaic.results.summary import summarize
from gpumosaic.results.summary_value import Summary
from gpumosaic.run.serve import ServeDescription, Service
from gpumosaic.runtime.api.client import ServiceClient
from gpumosaic.runtime.executors.contract import ExitReport, InProcessExecutor, LaunchSpec
from gpumosaic.runtime.leases import LeaseTable
from gpumosaic.runtime.state.live_result import store_summary

runner = CliRunner()
SIMULATE_KEYS = (
    "completed",
    "failed",
    "cancelled",
    "rejected",
    "unfinished",
    "avg_jct_s",
    "makespan_s",
    "utilization",
    "jain_index",
    "ftf_rho_mean",
    "slowdown_p99",
)


class FailingExecutor(InProcessExecutor):
    """The in-process executor, but a job whose command is ``fail`` exits 1 at once."""

    def __init__(self, table: LeaseTable) -> None:
        super().__init__(table, time.time, lambda job, model: 50.0)
        self.failing: list[str] = []

    def launch(self, spec: LaunchSpec) -> None:
        if spec.command == "fail":
            self.failing.append(spec.lease_id)
            return
        super().launch(spec)

    def poll(self) -> list[ExitReport]:
        out = [ExitReport(lease, 1, False, "boom", "") for lease in self.failing]
        self.failing.clear()
        return out + super().poll()


MECHANISMS = {
    "rounds": {"mechanism": "rounds", "policy": "fifo"},
    "gandiva": {"mechanism": "gandiva:quantum=1,switch=0.1,profile=0.5,migration=off"},
}


@pytest.fixture(params=sorted(MECHANISMS))
def service(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    config = ServeDescription(
        state=str(tmp_path / "svc" / "state.db"),
        port=0,
        round_s=1.0,
        grace_s=0.5,
        max_retries=0,
        **MECHANISMS[request.param],  # type: ignore[arg-type]
    )
    svc = Service(config, cluster("v100:2"), executor_factory=FailingExecutor)
    svc.start()
    yield svc
    svc.stop()


def states(svc: Service) -> dict[int, str]:
    return {j.id: j.state for j in svc.store.jobs()}


def test_one_done_one_failed_one_cancelled_job_answer_the_summary(service: Service) -> None:
    client = ServiceClient(service.url, timeout_s=120.0)  # a busy machine's first round
    done = client.submit({"command": "ok", "steps": 20})
    failed = client.submit({"command": "fail", "steps": 20})
    cancelled = client.submit({"command": "long", "steps": 1e6})
    wait_for(
        lambda: states(service).get(cancelled) == "running",
        120,
        "the long job to run",
        lambda: str(states(service)),
    )
    client.cancel(cancelled)
    wanted = {done: "done", failed: "failed", cancelled: "cancelled"}
    wait_for(lambda: states(service) == wanted, 120, f"ends {wanted}", lambda: str(states(service)))

    result = runner.invoke(app, ["jobs", "--summary", "--json", "--server", service.url])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.output)
    assert all(key in answer for key in SIMULATE_KEYS), sorted(answer)
    ends = {k: answer[k] for k in ("jobs", "completed", "failed", "cancelled", "rejected")}
    assert ends == {"jobs": 3, "completed": 1, "failed": 1, "cancelled": 1, "rejected": 0}
    assert answer["unfinished"] == 0
    assert answer["avg_jct_s"] > 0 and answer["makespan_s"] > 0
    assert 0 < answer["utilization"] <= 1  # its leases held GPUs

    # The decider's own records (what sim-vs-live reads) agree: not completed either.
    if service.driver is not None:
        from gpumosaic.mechanisms.rounds.sim.driver import job_records

        jobs = service.decider.jobs
        statuses = {r.job_id: r.status for r in job_records(jobs, service.decider.type_names)}
        assert statuses == {
            done: JobStatus.COMPLETED,
            failed: JobStatus.FAILED,
            cancelled: JobStatus.CANCELLED,
        }

    table = runner.invoke(app, ["jobs", "--summary", "--server", service.url])
    assert table.exit_code == 0, table.output
    assert "1 / 1 / 1 / 0 / 0" in table.output


def test_a_summary_takes_no_list_filter(service: Service) -> None:
    result = runner.invoke(app, ["jobs", "--summary", "--state", "done", "--server", service.url])
    assert result.exit_code != 0
    assert "--state" in result.output and "Traceback" not in result.output


def test_the_summary_wants_the_token(tmp_path: Path) -> None:
    config = ServeDescription(state=str(tmp_path / "s.db"), port=0, token="t0ken-of-the-service")
    svc = Service(config, cluster("v100:1"), executor_factory=FailingExecutor)
    svc.start()
    try:
        refused = runner.invoke(app, ["jobs", "--summary", "--server", svc.url])
        assert refused.exit_code != 0 and "401" in refused.output, refused.output
        ok = runner.invoke(
            app, ["jobs", "--summary", "--json", "--server", svc.url, "--token", config.token]
        )
        assert ok.exit_code == 0 and json.loads(ok.output)["jobs"] == 0, ok.output
    finally:
        svc.stop()


def test_a_simulation_and_a_live_run_with_the_same_ends_summarise_alike(
    tmp_path: Path,
) -> None:
    """The same five jobs (arrivals, starts, ends) as a simulation's records and as a
    live store's rows: one summary function, the same counts and times."""
    from gpumosaic.results.outcome import JobEnd, Outcome, Rejection, RejectReason
    from gpumosaic.runtime.jobs.submission import JobSubmission
    from gpumosaic.runtime.state.store import Store

    t0 = 5_000.0
    # (arrival, start, end, status); NaN: did not happen
    jobs = [
        (0.0, 1.0, 11.0, JobStatus.COMPLETED),
        (2.0, 3.0, 33.0, JobStatus.COMPLETED),
        (4.0, 5.0, 8.0, JobStatus.FAILED),
        (6.0, 7.0, 9.0, JobStatus.CANCELLED),
        (8.0, math.nan, math.nan, JobStatus.REJECTED),
        (9.0, 10.0, math.nan, JobStatus.RUNNING),
    ]
    records = tuple(
        JobRecord(
            i + 1, f"job{i + 1}", "", arrival, start, end, 1, 1000, status,
            rejection=RejectReason.NEVER_FITS if status is JobStatus.REJECTED else None,
        )
        for i, (arrival, start, end, status) in enumerate(jobs)
    )  # fmt: skip
    simulated = summarize(SimResult(records, TimelineRecorder().freeze(), RunStats(), 2000, 40.0))

    store = Store(tmp_path / "state.db")
    for arrival, start, end, status in jobs:
        job = store.add_job(JobSubmission(command="x", steps=10), t0 + arrival, 0)
        if not math.isnan(start):
            store.mark_running(job, f"L{job}", "V100", "0", t0 + start)
        if status is JobStatus.REJECTED:
            store.finish(job, JobEnd.rejected(Rejection(RejectReason.NEVER_FITS, "2 GPUs")), t0)
        elif status is JobStatus.CANCELLED:
            store.finish(job, JobEnd(Outcome.CANCELLED, None, "by the user"), t0 + end)
        elif status is not JobStatus.RUNNING:
            state = "done" if status is JobStatus.COMPLETED else "failed"
            store.process_ended(
                job, state=state, steps_done=10, attempts=1, exit_code=0, log_tail="",
                reason="", now=t0 + end,
            )  # fmt: skip
    live = store_summary(store, 2000, t0 + 40.0)
    store.close()

    for key in ("jobs", "completed", "failed", "cancelled", "rejected", "unfinished", "running"):
        assert getattr(live, key) == getattr(simulated, key), key
    for key in ("avg_jct_s", "p99_jct_s", "avg_queueing_s", "makespan_s"):
        assert getattr(live, key) == pytest.approx(getattr(simulated, key)), key
    assert (simulated.completed, simulated.failed, simulated.cancelled) == (2, 1, 1)
    assert simulated.avg_jct_s == pytest.approx((11.0 + 31.0) / 2)
    assert Summary.from_json(json.loads(json.dumps(live.to_json()))) == live
