"""A lease's life under the round driver, in-process on a fake clock (the in-process
executor; no Ray, no subprocess): an extended lease keeps its one process, a lease whose
process is lost sends its job back to the queue at its last checkpoint, a failing process
is retried (twice, the default) and then fails with its exit code."""

from __future__ import annotations

from pathlib import Path

from builders import Bench, in_process

from gpumosaic.runtime.executors.contract import ExitReport, InProcessExecutor


class DyingExecutor(InProcessExecutor):
    """The in-process executor, plus what a real one reports when a process dies under a
    lease: ``kill`` (as a dead node or actor would: lost, not the job's fault) and ``fail``
    (the job's own non-zero exit, as on every launch of the jobs in ``failing``)."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.failing: set[int] = set()
        self._reports: list[ExitReport] = []

    def kill(self, lease_id: str) -> None:
        self._procs.pop(lease_id)
        self._reports.append(ExitReport(lease_id, None, True, "", "the actor died"))

    def launch(self, spec) -> None:  # type: ignore[no-untyped-def]
        if spec.job_id in self.failing:
            self._reports.append(ExitReport(spec.lease_id, 3, False, "failing on purpose"))
            return
        super().launch(spec)

    def poll(self) -> list[ExitReport]:
        out, self._reports = self._reports, []
        return out + super().poll()


def dying(tmp_path: Path, counts: str = "v100:1", **options: object) -> Bench:
    bench = in_process(tmp_path, counts=counts, **options)  # type: ignore[arg-type]
    executor = DyingExecutor(bench.driver.table, bench.clock, bench.executor.rate_of)
    bench.driver.executor = executor
    bench.driver.supervisor.executor = executor  # the supervisor launches and polls
    bench.executor = executor
    return bench


def run_until_final(bench: Bench, rounds: int = 60) -> None:
    for _ in range(rounds):
        bench.run_round(ticks=10, dt=1.0)
        if all(s in ("done", "failed", "cancelled") for s in bench.states().values()):
            return
    raise AssertionError(f"jobs not final after {rounds} rounds: {bench.states()}")


def test_an_extended_lease_keeps_its_one_process(tmp_path: Path) -> None:
    # 100 steps at 2 steps/s against 10 s rounds: the only job holds five rounds.
    bench = in_process(tmp_path, counts="v100:1")
    job = bench.submit(100)
    run_until_final(bench)
    assert bench.states() == {job: "done"}
    leases = bench.store.leases(job)
    assert len(leases) == 1 and leases[0].extensions >= 4
    assert bench.executor.launches == 1  # extended, never relaunched
    assert bench.driver.counters.extensions >= 4


def test_a_lost_lease_sends_its_job_back_to_the_queue_at_its_checkpoint(tmp_path: Path) -> None:
    bench = dying(tmp_path)
    job = bench.submit(100)
    bench.run_round(ticks=10, dt=1.0)
    bench.run_round(ticks=3, dt=1.0)  # mid-round, with steps done since the last round
    lease_id = bench.driver.lease_of[job]
    checkpointed = bench.store.job(job).checkpoint_steps  # type: ignore[union-attr]
    bench.executor.kill(lease_id)  # type: ignore[attr-defined]
    bench.clock.t += 1.0
    bench.driver.tick(bench.clock())
    row = bench.store.job(job)
    assert row is not None and row.state == "queued"
    assert row.steps_done == checkpointed  # back at its last checkpoint, not further
    assert bench.driver.process_counters.lost == 1
    run_until_final(bench)
    assert bench.states() == {job: "done"}
    first, *later = bench.store.leases(job)
    assert first.id == lease_id and first.end_reason.startswith("lost")
    assert later  # it ran again on a new lease
    assert bench.driver.process_counters.lost == 1 and bench.store.job(job).attempts == 0  # type: ignore[union-attr]


def test_a_failing_job_is_retried_then_fails_with_its_exit_code(tmp_path: Path) -> None:
    bench = dying(tmp_path, counts="v100:2")
    good, bad = bench.submit(40), bench.submit(40)
    bench.executor.failing.add(bad)  # type: ignore[attr-defined]
    run_until_final(bench)
    assert bench.states() == {good: "done", bad: "failed"}
    failed = bench.store.job(bad)
    assert failed is not None and failed.exit_code == 3
    assert failed.attempts == 3 and len(bench.store.leases(bad)) == 3  # 1 + 2 retries
    assert "exit code 3" in failed.reason and "failing on purpose" in failed.log_tail
