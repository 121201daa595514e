"""One makespan: Gavel's reproduction reads the run summary's (docs/metrics.md), not a
definition of its own (it measured from the first *measured* arrival before)."""

from __future__ import annotations

import math

import pytest

from gpumosaic.experiments.reproductions.gavel import repro_figures
from gpumosaic.results.result import JobRecord, JobStatus, RunStats, SimResult, TimelineRecorder
from gpumosaic.results.summary import summarize


def _record(job_id: int, arrival: float, finish: float, measured: bool) -> JobRecord:
    done = JobStatus.COMPLETED
    return JobRecord(job_id, "", "t", arrival, arrival, finish, 1, 1000, done, measured=measured)


def test_reproduction_makespan_is_the_summary_makespan() -> None:
    recorder = TimelineRecorder()
    recorder.record(0.0, 1000, 1, 0, math.nan, 0.0, 0.0)
    # Job 0 warms the cluster up (outside the window); job 1 is measured.
    records = (_record(0, 0.0, 7200.0, False), _record(1, 3600.0, 5400.0, True))
    result = SimResult(records, recorder.freeze(), RunStats(), 1000, end_s=7200.0)
    jct_h, makespan_h, completed = repro_figures(result)
    summary = summarize(result)
    assert makespan_h == summary.makespan_s / 3600.0 == pytest.approx(2.0)  # was 0.5
    assert jct_h == summary.avg_jct_s / 3600.0 == pytest.approx(0.5)
    assert completed == 1
