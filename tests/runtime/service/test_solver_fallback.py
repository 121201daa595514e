"""A failed policy solve is a counted fallback, never a stop (issue 23, item 2): a job
whose weight makes Clarabel fail (NumericalError) no longer stops the round loop, and
the same fallback serves the simulator (``mechanisms/rounds/allocation.py``)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from builders import in_process

from gpumosaic.fallbacks import Fallback
from gpumosaic.runtime.jobs.submission import JobSubmission


def test_a_solver_failure_uses_the_isolated_fallback_and_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bench = in_process(tmp_path)
    # Admission refuses this weight (it is below 1e-3); a state file written before
    # admission existed may still hold one, so the driver must survive it.
    poison = JobSubmission.model_construct(
        **{**JobSubmission(command="train", steps=10).model_dump(), "priority_weight": 1e-300}
    )
    bench.store.add_job(poison, bench.clock(), default_retries=2)
    bench.submit(10)
    with caplog.at_level(logging.WARNING):
        for _ in range(4):
            bench.run_round(30, 1.0)
    assert bench.states() == {1: "done", 2: "done"}
    book = bench.driver.decider.book
    assert book.fallbacks.count(Fallback.POLICY_SOLVE_FAILED) >= 1
    warnings = [r for r in caplog.records if "isolated shares used" in r.getMessage()]
    assert len(warnings) == 1  # logged once, counted every time


def test_fallbacks_are_in_metrics(api_factory) -> None:  # type: ignore[no-untyped-def]
    svc = api_factory()
    book = svc.decider.book
    book.fallbacks += book.fallbacks.of(Fallback.POLICY_SOLVE_FAILED, 2)
    metrics = svc.metrics()
    assert metrics["fallbacks_total"] == 2
    assert metrics["fallback_policy_solve_failed_total"] == 2
