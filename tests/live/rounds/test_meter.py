"""The live round meter: running time from the first call, steps since last told, and
Gavel's EMA of the measured rates (``live.rounds.meter``)."""

from __future__ import annotations

import numpy as np

from gpumosaic.live.rounds.leases import LiveLease
from gpumosaic.live.rounds.meter import RATE_EMA_ALPHA, RoundMeter
from gpumosaic.mechanisms.rounds.decision import PlannedEntity

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


def test_round_counts_from_the_first_call_and_reports_steps_since_last_told() -> None:
    meter = RoundMeter({"V100": 0})
    assert meter.admit(1, {"V100": (2.0, 3), "A100": (9.0, 1)}) == {0: 2.0}
    meter.start_progress(1, 10.0)
    meter.lease_started(1, "a", now=200.0)
    running = lease(steps=40.0, iter_s=10.0, contacted_at=205.0)
    closed = close(meter, 260.0, running, steps=40.0)
    assert closed.report.end_s == 160.0  # decider's clock: wall - epoch
    np.testing.assert_array_equal(closed.report.ran_s, [55.0])  # from its first call
    np.testing.assert_array_equal(closed.report.steps_a, [30.0])  # 40 - 10 told before
    assert closed.attained == [(55.0 * 0.5, 1)]  # half a GPU
    (sample,) = closed.rates
    measured = (40.0 - 10.0) / 10.0
    assert sample.rate == RATE_EMA_ALPHA * measured + (1 - RATE_EMA_ALPHA) * 2.0
    assert sample.samples == 4
    assert meter.is_measured(1, 0)


def test_ended_lease_is_measured_once_and_a_silent_job_ran_no_time() -> None:
    meter = RoundMeter({"V100": 0})
    meter.lease_started(1, "a", now=200.0)
    meter.lease_ended(1, "a", lease(steps=30.0, iter_s=4.0, contacted_at=None), now=230.0)
    closed = close(meter, 260.0, None, steps=30.0)
    np.testing.assert_array_equal(closed.report.ran_s, [0.0])  # never called the API
    assert [(s.rate, s.samples) for s in closed.rates] == [(5.0, 1)]
    assert close(meter, 300.0, None, steps=30.0).rates == []  # the ended lease is used once
