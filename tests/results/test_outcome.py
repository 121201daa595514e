"""A job's end as one typed value: status and reason together, checked."""

from __future__ import annotations

import math

import pytest

from gpumosaic.results.outcome import JobEnd, JobEndError, Outcome, Rejection, RejectReason
from gpumosaic.results.result import JobRecord, JobStatus, status_of


@pytest.mark.parametrize(
    ("outcome", "final"),
    [
        (Outcome.COMPLETED, True),
        (Outcome.FAILED, True),
        (Outcome.CANCELLED, True),
        (Outcome.REJECTED, True),
        (Outcome.RUNNING, False),
        (Outcome.QUEUED, False),
        (Outcome.NEVER_STARTED, False),
    ],
)
def test_final_and_unfinished_split_every_outcome(outcome: Outcome, final: bool) -> None:
    assert outcome.final is final
    assert outcome.unfinished is not final


def test_a_rejection_needs_its_reason_and_nothing_else_has_one() -> None:
    with pytest.raises(JobEndError, match="needs its RejectReason"):
        JobEnd(Outcome.REJECTED)
    with pytest.raises(JobEndError, match="failed job has no RejectReason"):
        JobEnd(Outcome.FAILED, RejectReason.NEVER_FITS)


def test_a_rejected_end_keeps_its_code_and_its_words() -> None:
    end = JobEnd.rejected(Rejection(RejectReason.NO_THROUGHPUT, "no V100 rate"))
    assert (end.outcome, end.rejection, end.detail) == (
        Outcome.REJECTED,
        RejectReason.NO_THROUGHPUT,
        "no V100 rate",
    )
    assert end.words == "no_throughput: no V100 rate"  # as Rejection writes it
    assert JobEnd(Outcome.FAILED, None, "exit code 1").words == "exit code 1"


@pytest.mark.parametrize(
    ("status", "start_s", "outcome"),
    [
        (JobStatus.COMPLETED, 1.0, Outcome.COMPLETED),
        (JobStatus.FAILED, 1.0, Outcome.FAILED),
        (JobStatus.CANCELLED, math.nan, Outcome.CANCELLED),
        (JobStatus.RUNNING, 1.0, Outcome.RUNNING),
        (JobStatus.QUEUED, 1.0, Outcome.QUEUED),  # had run
        (JobStatus.QUEUED, math.nan, Outcome.NEVER_STARTED),
    ],
)
def test_a_records_end_and_status_map_both_ways(
    status: JobStatus, start_s: float, outcome: Outcome
) -> None:
    record = JobRecord(1, "j", "t", 0.0, start_s, math.nan, 1, 1000, status, reason="why")
    assert record.end == JobEnd(outcome, None, "why")
    assert status_of(outcome) is status


def test_a_rejected_records_end_has_its_typed_reason() -> None:
    rejection = Rejection(RejectReason.NEVER_FITS, "asks for 9 GPUs")
    record = JobRecord(
        1, "j", "t", 0.0, math.nan, math.nan, 9, 1000, JobStatus.REJECTED,
        reason=str(rejection), rejection=rejection.reason,
    )  # fmt: skip
    assert record.end == JobEnd.rejected(rejection)
    assert status_of(Outcome.REJECTED) is JobStatus.REJECTED
