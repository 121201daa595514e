"""Live views that tell the truth (issue 36), on the Gandiva page as on the rounds page: a
job that never held a GPU shows none (not the store's default V100, index 0), and counts
of steps are integers where they are (``150000``, not ``150000.0``)."""

from __future__ import annotations

import time
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from gpumosaic.mechanisms.gandiva.ui import GandivaView
from gpumosaic.runtime.ui.job_values import held_a_gpu, step_count
from gpumosaic.runtime.ui.state_file import JobFacts

NEVER_RAN = JobFacts(
    id=3, name="j", state="queued", steps=150000.0, steps_done=0.0, num_gpu=1,
    gpu_milli=1000, gpu_type="V100", gpu_index="0", attained_s=0.0, attempts=0,
    submitted_at=time.time(), started_at=None, finished_at=None, reason="",
    cancel_requested=False, lease_id=None,
)  # fmt: skip


def gandiva_job(job: JobFacts) -> dict[str, Any]:
    """The Gandiva page's job entry (the view over a store that knows nothing more)."""
    view = GandivaView.__new__(GandivaView)
    view.service = SimpleNamespace(  # type: ignore[assignment]
        store=SimpleNamespace(gandiva_job=lambda _id: None),
        table=SimpleNamespace(get=lambda _id: None),
    )
    return view._job(job, None)


def test_step_counts_are_integers_where_they_are() -> None:
    assert step_count(150000.0) == 150000 and isinstance(step_count(150000.0), int)
    assert step_count(2.5) == 2.5
    assert step_count(float("nan")) is None


def test_the_gandiva_page_shows_no_gpu_for_a_job_that_never_ran() -> None:
    assert not held_a_gpu(NEVER_RAN)
    never = gandiva_job(NEVER_RAN)
    assert never["type"] is None and never["index"] is None
    assert never["steps"] == 150000 and isinstance(never["steps"], int)
    assert never["done"] == 0 and isinstance(never["done"], int)
    ran = gandiva_job(replace(NEVER_RAN, state="done", steps_done=150000.0, gpu_index="1"))
    assert (ran["type"], ran["index"], ran["done"]) == ("V100", "1", 150000)
