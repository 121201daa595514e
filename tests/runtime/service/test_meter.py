"""The live round meter: the time a round credits (the lease's reported stepping time),
steps since last told, and Gavel's EMA of the measured rates (``live.rounds.meter``)."""

from __future__ import annotations

import numpy as np

from gpumosaic.mechanisms.rounds.live.meter import RATE_EMA_ALPHA, RoundMeter
from gpumosaic.model.plan import PlannedEntity
from gpumosaic.runtime.leases import LiveLease

ENTRY = PlannedEntity((1,), "V100", (), False, (50.0,), (1.0,))


def lease(steps: float, iter_s: float, contacted_at: float | None) -> LiveLease:
    return LiveLease(
        lease_id="a", job_id=1, round_idx=1, gpu_type="V100", type_index=0, world_size=1,
        total_steps=1_000.0, until_step=1_000.0, deadline=1e9, launched_at=0.0,
        steps_at_launch=10.0, measured_grant=False, steps=steps, iter_s=iter_s,
        contacted=contacted_at is not None, contacted_at=contacted_at,
    )  # fmt: skip


def close(meter: RoundMeter, now: float, current: LiveLease | None, steps: float):  # type: ignore[no-untyped-def]
    return meter.close(
        (ENTRY,),
        now,
        100.0,
        steps_now=lambda job: steps,
        live_lease=lambda job: (current is not None, current),
        lease_by_id=lambda lease_id: current,
        demand_milli=lambda job: 500,
    )


def test_round_credits_the_stepping_time_and_reports_steps_since_last_told() -> None:
    meter = RoundMeter({"V100": 0})
    assert meter.admit(1, {"V100": (2.0, 3), "A100": (9.0, 1)}) == {0: 2.0}
    meter.start_progress(1, 10.0)
    meter.lease_started(1, "a", now=200.0)
    running = lease(steps=40.0, iter_s=10.0, contacted_at=205.0)
    closed = close(meter, 260.0, running, steps=40.0)
    assert closed.report.end_s == 160.0  # decider's clock: wall - epoch
    # It held the GPU 55 s from its first call, but stepped 10 s (its report): Gavel
    # credits the execution time, the simulator steps / rate; the rest was waiting.
    np.testing.assert_array_equal(closed.report.ran_s, [10.0])
    np.testing.assert_array_equal(closed.report.steps_a, [30.0])  # 40 - 10 told before
    assert closed.attained == [(10.0 * 0.5, 1)]  # half a GPU
    (sample,) = closed.rates
    measured = (40.0 - 10.0) / 10.0
    assert sample.rate == RATE_EMA_ALPHA * measured + (1 - RATE_EMA_ALPHA) * 2.0
    assert sample.samples == 4
    assert meter.is_measured(1, 0)


def test_ended_lease_is_measured_once_and_credited_its_last_stepping_time() -> None:
    meter = RoundMeter({"V100": 0})
    meter.lease_started(1, "a", now=200.0)
    meter.lease_ended(1, "a", lease(steps=30.0, iter_s=4.0, contacted_at=201.0), now=230.0)
    closed = close(meter, 260.0, None, steps=30.0)
    np.testing.assert_array_equal(closed.report.ran_s, [4.0])  # stepped 4 s, then ended
    assert [(s.rate, s.samples) for s in closed.rates] == [(5.0, 1)]
    assert close(meter, 300.0, None, steps=30.0).rates == []  # the ended lease is used once


def test_a_silent_job_ran_no_time() -> None:
    meter = RoundMeter({"V100": 0})
    meter.lease_started(1, "a", now=200.0)
    closed = close(meter, 260.0, lease(steps=10.0, iter_s=0.0, contacted_at=None), steps=10.0)
    np.testing.assert_array_equal(closed.report.ran_s, [0.0])  # never called the API
    assert closed.attained == [(0.0, 1)]


def test_an_extended_lease_is_credited_each_round_only_its_new_stepping_time() -> None:
    # The process's stepping clock runs on across extensions (``Lease.stepping_s``): a
    # round is credited what it added, so two rounds of 30 s each are not 30 + 60.
    meter = RoundMeter({"V100": 0})
    meter.lease_started(1, "a", now=200.0)
    first = close(meter, 240.0, lease(steps=40.0, iter_s=30.0, contacted_at=201.0), steps=40.0)
    np.testing.assert_array_equal(first.report.ran_s, [30.0])
    meter.lease_started(1, "a", now=245.0, launched=False)
    second = close(meter, 280.0, lease(steps=70.0, iter_s=60.0, contacted_at=201.0), steps=70.0)
    np.testing.assert_array_equal(second.report.ran_s, [30.0])
    np.testing.assert_array_equal(second.report.steps_a, [30.0])


def test_a_pair_is_credited_its_longer_stepping_member() -> None:
    meter = RoundMeter({"V100": 0})
    pair = PlannedEntity((1, 2), "V100", (), False, (50.0, 50.0), (1.0, 1.0))
    a = lease(steps=40.0, iter_s=30.0, contacted_at=201.0)
    b = lease(steps=20.0, iter_s=12.0, contacted_at=203.0)
    b.lease_id, b.job_id = "b", 2
    by_job, by_id = {1: a, 2: b}, {"a": a, "b": b}
    meter.lease_started(1, "a", now=200.0, partner=2)
    meter.lease_started(2, "b", now=200.0, partner=1)
    closed = meter.close(
        (pair,),
        240.0,
        100.0,
        steps_now=lambda job: by_job[job].steps,
        live_lease=lambda job: (True, by_job[job]),
        lease_by_id=by_id.get,
        demand_milli=lambda job: 1000,
    )
    np.testing.assert_array_equal(closed.report.ran_s, [30.0])  # Gavel: the larger one
    assert sorted(closed.attained) == [(12.0, 2), (30.0, 1)]
