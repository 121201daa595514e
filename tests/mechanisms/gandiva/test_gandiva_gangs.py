"""Gandiva and a job that fits only across servers (``JobSpec.may_span_nodes``): it is
admitted by the one admission rule (``mechanisms/admission.py``) and placed as one gang
by ``placement/gang.py``, on fully free GPUs of several servers that it holds alone
(never time-sliced, packed or moved) until it ends. A hand-written driver, as in
``test_gandiva_decider``."""

from __future__ import annotations

from dataclasses import replace

from test_gandiva_decider import decider, job, v100s

from gpumosaic.mechanisms.gandiva import Reject, Start, StartGang
from gpumosaic.model import JobSpec
from gpumosaic.results.outcome import RejectReason


def spanning(job_id: int, k: int) -> JobSpec:
    return replace(job(job_id, k), may_span_nodes=True)


def test_a_spanning_job_runs_as_one_gang_on_free_gpus_of_several_servers() -> None:
    d = decider(v100s(3, 2), max_share=2)  # three servers of two V100s
    step = d.admit(spanning(0, 4), 0.0)
    (start,) = step.actions
    assert isinstance(start, StartGang) and start.job_id == 0
    assert sum(len(gpus) for _, gpus in start.parts) == 4 and len(start.parts) == 2
    d.sets.check()
    # A one-GPU job goes to the third server, never beside the gang.
    (one,) = d.admit(job(1), 1.0).actions
    assert isinstance(one, Start) and one.node not in {n for n, _ in start.parts}
    # Another 4-GPU job waits (one server free): no time-slicing into the gang.
    assert d.admit(spanning(2, 4), 2.0).actions == ()
    assert [j.id for j in d.queue] == [2]
    # The gang ends: its GPUs go back and the waiting gang starts on them.
    step = d.job_finished(0, 50.0)
    (started,) = [a for a in step.actions if isinstance(a, StartGang)]
    assert started.job_id == 2 and d.queue == []
    d.sets.check()


def test_a_job_that_may_not_span_or_fits_nowhere_is_refused_with_the_same_reason() -> None:
    d = decider(v100s(2, 2))
    for spec in (job(0, 4), spanning(1, 8)):  # 4 GPUs that may not span; 8 of 4
        (refused,) = d.admit(spec, 0.0).actions
        assert isinstance(refused, Reject) and refused.reason.reason is RejectReason.NEVER_FITS


def test_a_job_that_fits_one_server_never_spans() -> None:
    d = decider(v100s(2, 2), max_share=2)
    d.admit(job(0), 0.0)
    (start,) = d.admit(spanning(1, 2), 0.0).actions
    assert isinstance(start, Start) and len(start.gpus) == 2  # one server, whole
