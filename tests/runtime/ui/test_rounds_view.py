"""The serve page's world, from a round service with the in-process executor (no Ray):
why each queued job waits, rates and allocation from the decider, progress between
rounds, rho, and that an unchanged job keeps its value object (only changes travel)."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpumosaic.mechanisms.rounds.ui import RoundsView
from gpumosaic.run.serve import ServeDescription, Service
from gpumosaic.runtime.cluster import RayNode, discover
from gpumosaic.runtime.executors.contract import InProcessExecutor
from gpumosaic.runtime.jobs.submission import JobSubmission
from gpumosaic.runtime.leases import LeaseTable
from gpumosaic.runtime.ui.stream import Feed, diff
from waiting import wait_for


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    live = discover([RayNode("n0", "10.0.0.1", (("V100", 2),))], None)
    config = ServeDescription(state=str(tmp_path / "state.db"), port=0, round_s=2.0)

    def executor(table: LeaseTable) -> InProcessExecutor:
        return InProcessExecutor(table, time.time, lambda job, model: 100.0)

    svc = Service(config, live, executor_factory=executor)
    svc.start()
    yield svc
    svc.stop()


def submit(svc: Service, steps: float, gpus: int = 1) -> int:
    return svc.store.add_job(JobSubmission(command="x", steps=steps, gpus=gpus), time.time(), 0)


def wait_round(svc: Service, at_least: int) -> None:
    wait_for(
        lambda: svc.driver.round_idx if svc.driver is not None else None,
        60,
        f"round {at_least}'s boundary",
        until=lambda idx: idx is not None and idx >= at_least,
    )


def test_queue_says_why_and_jobs_carry_the_deciders_view(service: Service) -> None:
    view = RoundsView(service)
    wait_round(service, 0)
    # Three two-GPU jobs on two GPUs: one runs, two wait their turn.
    # No boundary between the submissions and the view (a round with nothing to run ends
    # at once, so the next boundary may come at any moment): the driver's lock held.
    with service.driver._lock:  # type: ignore[union-attr]
        ids = [submit(service, 10**6, gpus=2) for _ in range(3)]
        first = service.driver.round_idx  # type: ignore[union-attr]
        world = view.world()
    assert {world["plan"][str(i)]["why"] for i in ids} == {
        "submitted during this round: admitted at the next round boundary"
    }
    wait_round(service, first + 1)

    def one_runs_and_has_stepped(world: dict) -> bool:  # type: ignore[type-arg]
        states = {i: world["jobs"][str(i)]["state"] for i in ids}
        running = [i for i in ids if states[i] == "running"]
        return sorted(states.values()) == ["queued", "queued", "running"] and (
            world["progress"][str(running[0])][0] > 0
        )

    world = wait_for(
        view.world, 60, "one job running (and stepping), two queued", until=one_runs_and_has_stepped
    )
    states = {i: world["jobs"][str(i)]["state"] for i in ids}
    for i in ids:
        plan = world["plan"][str(i)]
        assert plan["rates"] == [1.0] and plan["measured"] == [False]  # the placeholder prior
        assert plan["measuring"] is True  # the page says "measuring", not 1 step/s's estimate
        assert math.isclose(sum(plan["x"]), 1 / 3, rel_tol=0.05)  # an equal share of V100
        if states[i] == "queued":
            assert plan["why"].startswith("waits its turn: allocated V100 33%")
    running = next(i for i in ids if states[i] == "running")
    gpus = {k: v for k, v in world["gpus"].items() if v}
    assert gpus == {"0.0": [[running, 1000]], "0.1": [[running, 1000]]}
    done, rho = world["progress"][str(running)]
    assert done > 0 and rho is not None and rho > 0
    s = world["service"]["s"]
    assert s["counts"] == {"queued": 2, "running": 1} and s["gpus_total"] == 2
    assert s["rho_max"] >= s["rho_mean"] > 0
    rounds = world["rounds"]
    assert str(service.driver.round_idx) in rounds  # type: ignore[union-attr]


def test_an_unchanged_job_keeps_its_value_so_only_changes_travel(service: Service) -> None:
    view = RoundsView(service)
    wait_round(service, 0)
    a, b = submit(service, 10**6), submit(service, 10**6)
    wait_round(service, service.driver.round_idx + 1)  # type: ignore[union-attr]
    # No boundary or tick between the two views (the driver's lock held): only the
    # submission changes the state in between.
    with service.driver._lock:  # type: ignore[union-attr]
        before = view.world()
        submit(service, 10**6)  # a store write that changes neither a nor b
        after = view.world()
    for i in (a, b):
        assert after["jobs"][str(i)] is before["jobs"][str(i)]
    changed, deleted = diff(before, after)
    assert set(changed["jobs"]) == {"3"} and deleted == {}


def test_a_feed_builds_once_per_interval_for_every_client(service: Service) -> None:
    view = RoundsView(service)
    feed = Feed(view.world, interval_s=60.0)
    version = feed.refresh()
    for _ in range(20):
        assert feed.refresh() == version
    assert feed.refreshes == 1


def _facts(**changes: object) -> object:
    from dataclasses import replace

    from gpumosaic.runtime.ui.state_file import JobFacts

    base = JobFacts(
        id=7, name="j", state="queued", steps=150000.0, steps_done=0.0, num_gpu=1,
        gpu_milli=1000, gpu_type="V100", gpu_index="0", attained_s=0.0, attempts=0,
        submitted_at=time.time(), started_at=None, finished_at=None, reason="",
        cancel_requested=False, lease_id=None,
    )  # fmt: skip
    return replace(base, **changes)


def test_a_failing_job_says_so_and_why_not_that_it_waits_its_turn(service: Service) -> None:
    """Issue 36: a job whose attempt failed read "waits its turn" while a GPU sat idle."""
    view = RoundsView(service)
    wait_round(service, 0)
    failing = _facts(attempts=1, reason="attempt 1 failed (exit status 1)")
    why = view._why(failing, {"x": [0.5], "got_s": [0.0]})  # type: ignore[arg-type]
    assert why.startswith("failing: attempt 1 failed (exit status 1); retried")
    assert "waits its turn" not in why


def test_a_job_that_never_ran_shows_no_gpu_and_counts_are_integers(service: Service) -> None:
    view = RoundsView(service)
    never = view._job(_facts())  # type: ignore[arg-type]
    assert never["type"] is None and never["index"] is None  # the store's default V100 / 0
    assert never["steps"] == 150000 and isinstance(never["steps"], int)
    assert never["done"] == 0 and isinstance(never["done"], int)
    ran = view._job(_facts(state="done", steps_done=150000.0, gpu_index="1"))  # type: ignore[arg-type]
    assert (ran["type"], ran["index"]) == ("V100", "1")
    half = view._job(_facts(steps_done=2.5))  # type: ignore[arg-type]
    assert half["done"] == 2.5


def test_measuring_until_the_rate_it_would_use_is_measured(service: Service) -> None:
    """Issue 36: a queued job showed "est. finish in 578d 16h" from the 1 step/s
    placeholder. The page shows "measuring" wherever the plan says ``measuring``."""
    view = RoundsView(service)
    running = _facts(state="running", gpu_type="V100")
    assert view._measuring(running, [False], None) is True  # type: ignore[arg-type]
    assert view._measuring(running, [True], None) is False  # type: ignore[arg-type]
    queued = _facts()
    assert view._measuring(queued, [False], [0.5]) is True  # type: ignore[arg-type]
    assert view._measuring(queued, [True], [0.5]) is False  # type: ignore[arg-type]
    assert view._measuring(queued, [False], [0.0]) is False  # type: ignore[arg-type]
    assert view._measuring(queued, [False], None) is False  # type: ignore[arg-type]
