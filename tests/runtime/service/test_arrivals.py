"""``replay.Arrivals``: a workload's jobs handed to the service at their arrival times
(job time), in arrival order, and how long the replay sleeps before the next one."""

from __future__ import annotations

import pytest

from gpumosaic.experiments.sim_vs_live.replay import Arrivals
from gpumosaic.model.job import JobSpec


def job(job_id: int, arrival_s: float) -> JobSpec:
    return JobSpec(job_id, arrival_s, "any", num_gpu=1, gpu_milli=1000, work=10.0)


def test_jobs_go_in_at_their_arrival_in_arrival_order_once() -> None:
    submitted: list[int] = []

    def submit(j: JobSpec) -> int:
        submitted.append(j.id)
        return 100 + len(submitted)  # the service's id

    arrivals = Arrivals([job(3, 50.0), job(1, 0.0), job(2, 50.0), job(0, 200.0)], submit)
    arrivals.submit_due(0.0)
    assert submitted == [1] and not arrivals.all_in
    arrivals.submit_due(49.9)
    assert submitted == [1]
    arrivals.submit_due(60.0)
    arrivals.submit_due(60.0)  # nothing twice
    assert submitted == [1, 2, 3]  # ties by id
    arrivals.submit_due(1e9)
    assert submitted == [1, 2, 3, 0] and arrivals.all_in
    assert arrivals.ids == {101: 1, 102: 2, 103: 3, 104: 0}


@pytest.mark.parametrize(
    ("now", "scale", "wait"),
    [
        (0.0, 50.0, 0.2),  # next arrival 100 s of job time away = 2 s wall: poll first
        (95.0, 50.0, 0.1),  # 5 s of job time = 0.1 s wall
        (120.0, 50.0, 0.0),  # overdue: no sleep
    ],
)
def test_the_replay_sleeps_until_the_next_arrival_at_most_a_poll(
    now: float, scale: float, wait: float
) -> None:
    arrivals = Arrivals([job(0, 0.0), job(1, 100.0)], lambda j: j.id)
    arrivals.submit_due(0.0)
    assert arrivals.wait_s(now, scale) == pytest.approx(wait)
    arrivals.submit_due(1e9)
    assert arrivals.wait_s(now, scale) == Arrivals.POLL_S  # all in: poll the service
