"""``serve --mechanism gandiva`` with a job that fits only across servers: one lease on
GPUs of two nodes (a gang), run to its end as the round service runs it; beside it a job
that fits nowhere (rejected, with the simulator's typed reason), one whose process fails
(failed, never completed) and one cancelled while it runs. In-process virtual jobs on a
fake clock, driven tick by tick."""

from __future__ import annotations

from pathlib import Path

from test_gandiva_live import SLICING, bench

from gpumosaic.runtime.executors.contract import ExitReport, InProcessExecutor, LaunchSpec
from gpumosaic.runtime.jobs.submission import JobSubmission
from gpumosaic.runtime.state.records import LeaseRow


class FailingExecutor(InProcessExecutor):
    """A job whose command is ``fail`` exits 1 at once."""

    failing: list[str]

    def launch(self, spec: LaunchSpec) -> None:
        if spec.command == "fail":
            self.failing.append(spec.lease_id)
            return
        super().launch(spec)

    def poll(self) -> list[ExitReport]:
        out = [ExitReport(lease, 1, False, "boom", "") for lease in self.failing]
        self.failing.clear()
        return out + super().poll()


def test_a_spanning_job_runs_on_two_nodes_and_every_end_is_typed(tmp_path: Path) -> None:
    b = bench(tmp_path, "v100:2", SLICING, nodes=2)  # two nodes of two V100s
    executor = FailingExecutor(b.driver.table, b.clock, lambda job, model: 2.0)
    executor.failing = []
    b.driver.supervisor.executor = executor
    b.executor = executor

    def submit(command: str, steps: float, gpus: int) -> int:
        sub = JobSubmission(command=command, steps=steps, gpus=gpus, max_retries=0)
        return b.store.add_job(sub, b.clock(), default_retries=0)

    gang = submit("train", 20, 4)
    never = submit("train", 20, 8)
    b.run(2.0, until_done=False)
    (lease,) = [row for row in b.store.leases() if row.job_id == gang]
    assert _nodes(lease) == 2  # one lease over GPUs of both nodes
    b.run(20.0)
    failed = submit("fail", 20, 1)
    cancelled = submit("train", 1e6, 1)
    b.run(3.0, until_done=False)
    b.store.request_cancel(cancelled, b.clock())
    b.run(5.0, until_done=False)
    ends = {j.id: j.state for j in b.store.jobs()}
    assert ends == {gang: "done", never: "rejected", failed: "failed", cancelled: "cancelled"}
    rejected = next(j for j in b.store.jobs() if j.id == never)
    assert "never_fits" in (rejected.reason or ""), rejected
    assert b.overlaps == []


def _nodes(lease: LeaseRow) -> int:
    return len({part[0] for part in lease.parts})
