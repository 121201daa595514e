"""The nvshare thesis table: every reference cell within 15%, and the orderings that matter."""

from __future__ import annotations

import pytest

from gpumosaic.experiments.reproductions.nvshare import (
    REFERENCE_S,
    ordering_checks,
    reproduce_nvshare,
)


@pytest.fixture(scope="module")
def rows():
    return reproduce_nvshare((1000.0, 60.0, 30.0))


def test_every_reference_cell_within_15_percent(rows) -> None:
    cells = [r for r in rows if r.reference_s is not None]
    assert len(cells) == len(REFERENCE_S) == 20
    for r in cells:
        assert r.error_pct is not None
        assert abs(r.error_pct) <= 15.0, (r.job, r.setup, r.tq_s, r.total_s, r.reference_s)


def test_serial_is_the_calibration(rows) -> None:
    for r in rows:
        if r.setup == "serial":
            assert r.total_s == pytest.approx(r.reference_s)


def test_co_location_versus_serial_and_big_jobs_tq_order(rows) -> None:
    checks = ordering_checks(rows)
    vs_serial = [c for c in checks if "beats serial" in c.question]
    assert vs_serial and all(c.agrees for c in vs_serial)
    # Big jobs pay a refill per hand-over: the longest quantum wins, as measured.
    for job in ("big_50", "big_90"):
        (tq_check,) = [c for c in checks if c.job == job and c.question == "fastest TQ"]
        assert tq_check.agrees and tq_check.ours == "1000"


def test_thrashing_only_when_working_sets_overflow(rows) -> None:
    off = {r.job: r for r in rows if r.setup == "off"}
    assert off["small_50"].thrash_s == 0 and off["small_50"].memory_pressure < 1
    assert off["big_50"].thrash_s > 0 and off["big_50"].memory_pressure > 1


def test_unreferenced_tq_has_no_error_column() -> None:
    rows = reproduce_nvshare((45.0,))
    on = [r for r in rows if r.setup == "on"]
    assert len(on) == 4 and all(r.tq_s == 45.0 and r.reference_s is None for r in on)
