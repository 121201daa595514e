"""The nvshare thesis table: every reference cell within the README's 8.1%, and the orderings
that matter."""

from __future__ import annotations

import itertools

import pytest

from gpumosaic.experiments.reproductions.nvshare import (
    REFERENCE_S,
    ordering_checks,
    reproduce_nvshare,
)


@pytest.fixture(scope="module")
def rows():
    return reproduce_nvshare((1000.0, 60.0, 30.0))


# The accuracy the README and docs/sharing.md claim for every published cell.
CLAIMED_ERROR_PCT = 8.1


def test_every_reference_cell_within_the_claimed_error(rows) -> None:
    cells = [r for r in rows if r.reference_s is not None]
    assert len(cells) == len(REFERENCE_S) == 20
    for r in cells:
        assert r.error_pct is not None
        assert abs(r.error_pct) <= CLAIMED_ERROR_PCT, (
            r.job,
            r.setup,
            r.tq_s,
            r.total_s,
            r.reference_s,
        )


def test_serial_is_the_calibration(rows) -> None:
    for r in rows:
        if r.setup == "serial":
            assert r.total_s == pytest.approx(r.reference_s)


def test_co_location_versus_serial_and_big_jobs_tq_order(rows) -> None:
    checks = ordering_checks(rows)
    # A model good to 8.1% per cell can only claim the orderings whose measured margin
    # is wider than that (big_90 at TQ 60 is 2% slower than serial: inside the error).
    serial = {r.job: r.reference_s for r in rows if r.setup == "serial"}
    margin = {
        (r.job, "off" if r.tq_s is None else f"on TQ={r.tq_s:g}"): abs(
            r.reference_s / serial[r.job] - 1
        )
        for r in rows
        if r.setup != "serial" and r.reference_s is not None
    }
    vs_serial = [
        c
        for c in checks
        if c.question.endswith(" beats serial")
        and margin[(c.job, c.question.removesuffix(" beats serial"))] * 100 > CLAIMED_ERROR_PCT
    ]
    assert len(vs_serial) >= 10 and all(c.agrees for c in vs_serial)
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


def test_short_quanta_slow_down_without_collapse() -> None:
    # Measured on the real system (kept aside): from TQ 30 to TQ 5 the big jobs slow down by
    # less than 2x. A hand-over refills ~15 GB in ~2.2 s (dense pass, prefetch, full duplex),
    # so a 5 s quantum still leaves more than half of it for work.
    rows = {(r.job, r.tq_s): r for r in reproduce_nvshare((30.0, 10.0, 5.0)) if r.setup == "on"}
    for job in ("big_50", "big_90"):
        assert rows[(job, 5.0)].total_s < 2.0 * rows[(job, 30.0)].total_s
        assert rows[(job, 5.0)].handovers < 1000
        # Shorter quanta cost more hand-overs and more time, monotonically.
        assert rows[(job, 30.0)].total_s < rows[(job, 10.0)].total_s < rows[(job, 5.0)].total_s


@pytest.mark.slow  # the nvshare reproduction at several quanta: seconds of CPU
def test_any_quantum_finishes_and_longer_quanta_never_hurt_big_jobs() -> None:
    tqs = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 1000.0)
    rows = [r for r in reproduce_nvshare(tqs) if r.setup == "on"]
    for job in ("big_50", "big_90"):
        totals = [r.total_s for r in rows if r.job == job]
        assert all(a >= b for a, b in itertools.pairwise(totals)), (job, totals)
        # Below a refill (~2.3 s) each grant moves the missing set once and computes one
        # sweep: slow, but it finishes.
        assert totals[0] < 20 * totals[-1]
