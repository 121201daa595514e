import math

import numpy as np
import pytest

from gpumosaic.results.result import JobRecord, JobStatus, RunStats, SimResult, TimelineRecorder
from gpumosaic.results.summary import summarize


def record(
    job_id: int, arrival: float, start: float, finish: float, status: JobStatus
) -> JobRecord:
    return JobRecord(
        job_id,
        f"j{job_id}",
        "t",
        arrival,
        start,
        finish,
        1,
        1000,
        status,
        alone_s=finish - start if status is JobStatus.COMPLETED else math.nan,
    )


def test_summary_numbers_by_hand() -> None:
    recorder = TimelineRecorder()
    # One GPU (1000 milli): busy 0..10, idle 10..20, half busy 20..40.
    recorder.record(0, 1000, 1, 0, 0.0, 300, 100)
    recorder.record(10, 0, 0, 0, 0.0, 30, 100)
    recorder.record(20, 500, 1, 0, 0.5, 300, 100)
    records = (
        record(0, 0, 0, 10, JobStatus.COMPLETED),  # JCT 10
        record(1, 5, 20, 40, JobStatus.COMPLETED),  # JCT 35, queued 15
        record(2, 6, math.nan, math.nan, JobStatus.REJECTED),
    )
    result = SimResult(records, recorder.freeze(), RunStats(), total_gpu_milli=1000, end_s=40)
    s = summarize(result)
    assert (s.jobs, s.completed, s.rejected) == (3, 2, 1)
    assert s.avg_jct_s == pytest.approx(22.5)
    assert s.makespan_s == 40
    # (1000*10 + 0*10 + 500*20) / (1000 * 40) = 20000 / 40000
    assert s.utilization == pytest.approx(0.5)
    assert s.avg_queueing_s == pytest.approx(7.5)  # (0 + 15) / 2
    # Fragmentation 0 for 20 s and 0.5 for 20 s.
    assert s.fragmentation_rate_mean == pytest.approx(0.25)
    # Energy: (400*10 + 130*10 + 400*20) J = 13,300 J.
    assert s.energy_kwh == pytest.approx(13_300 / 3.6e6)
    assert s.avg_slowdown == pytest.approx(np.mean([10 / 10, 35 / 20]))
    assert s.to_json()["p99_jct_s"] == pytest.approx(np.percentile([10, 35], 99))


def test_empty_results_give_nulls_not_nan_in_json() -> None:
    recorder = TimelineRecorder()
    recorder.record(0, 0, 0, 0, math.nan, 0, 0)
    result = SimResult((), recorder.freeze(), RunStats(), total_gpu_milli=1000, end_s=0)
    payload = summarize(result).to_json()
    assert payload["avg_jct_s"] is None and payload["jobs"] == 0
