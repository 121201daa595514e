"""The API never waits on a launch (issue 35, class 5): a round boundary decides and
records under the store's lock, then launches outside it, so a launch that takes long
(a Ray actor starting) never holds up a read or a submission."""

from __future__ import annotations

import threading
from pathlib import Path

from builders import in_process

from gpumosaic.runtime.executors.contract import LaunchSpec
from gpumosaic.runtime.jobs.submission import JobSubmission


def test_the_store_answers_while_a_boundary_launches(tmp_path: Path) -> None:
    bench = in_process(tmp_path)
    for _ in range(3):
        bench.submit(100)
    launching = threading.Event()
    release = threading.Event()
    launch = bench.executor.launch

    def slow_launch(spec: LaunchSpec) -> None:  # a launch that waits (for Ray, say)
        launching.set()
        assert release.wait(30), "the test never released the launch"
        launch(spec)

    bench.executor.launch = slow_launch  # type: ignore[method-assign]
    boundary = threading.Thread(target=bench.driver.boundary, args=(bench.clock(),))
    boundary.start()
    try:
        assert launching.wait(30), "the boundary launched nothing"
        answered = threading.Event()

        def api_calls() -> None:  # what GET /v1/jobs and POST /v1/jobs do
            bench.store.jobs()
            sub = JobSubmission(command="train", steps=10)
            bench.store.add_job(sub, bench.clock(), default_retries=2)
            answered.set()

        threading.Thread(target=api_calls, daemon=True).start()
        assert answered.wait(10), "the store waited on a launch (its lock held across it)"
        # The round was recorded before the launch: the jobs are running in the store.
        assert sum(j.state == "running" for j in bench.store.jobs()) >= 1
    finally:
        release.set()
        boundary.join(30)
    assert not boundary.is_alive()
    assert len(bench.driver.lease_of) == bench.executor.launches >= 1


def test_the_store_answers_while_a_boundary_solves(tmp_path: Path) -> None:
    # The policy's solve (an LP for 500 jobs may take seconds) runs with the store's lock
    # free: a read, a submission and a cancellation made while it is blocked all return.
    bench = in_process(tmp_path)
    jobs = [bench.submit(100) for _ in range(3)]
    solving = threading.Event()
    release = threading.Event()
    plan = bench.driver.decider.plan

    def blocked_plan(t: float):  # type: ignore[no-untyped-def]
        solving.set()
        assert release.wait(30), "the test never released the solve"
        return plan(t)

    bench.driver.decider.plan = blocked_plan  # type: ignore[method-assign]
    boundary = threading.Thread(target=bench.driver.boundary, args=(bench.clock(),))
    boundary.start()
    try:
        assert solving.wait(30), "the boundary never solved"
        answered = threading.Event()

        def api_calls() -> None:  # GET /v1/jobs, POST /v1/jobs, DELETE /v1/jobs/ID
            bench.store.jobs()
            sub = JobSubmission(command="train", steps=10)
            bench.store.add_job(sub, bench.clock(), default_retries=2)
            bench.store.request_cancel(jobs[0], bench.clock())
            answered.set()

        threading.Thread(target=api_calls, daemon=True).start()
        assert answered.wait(10), "the store waited on a solve (its lock held across it)"
        assert boundary.is_alive()  # the solve is still blocked: the calls did not wait
    finally:
        release.set()
        boundary.join(30)
    assert not boundary.is_alive()
    # The fence: the job cancelled during the solve was not launched.
    assert jobs[0] not in bench.driver.lease_of
    bench.clock.t += 1.0
    bench.driver.tick(bench.clock())
    assert bench.store.job(jobs[0]).state == "cancelled"  # type: ignore[union-attr]
