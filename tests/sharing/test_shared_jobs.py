"""Phase plans of a job on a shared GPU."""

from __future__ import annotations

import pytest

from gpumosaic.model.job import JobSpec
from gpumosaic.sharing import Phase, SharedJob


def test_one_gpu_phase_then_one_cpu_phase_by_default() -> None:
    job = SharedJob("j", 100.0, 0.9, 10.0)
    assert job.phases() == (Phase(True, pytest.approx(90.0)), Phase(False, pytest.approx(10.0)))


def test_cycles_alternate_and_last_is_cut_short() -> None:
    job = SharedJob("j", 50.0, 0.5, 10.0, cycle_s=20.0)
    assert [(p.on_gpu, p.duration_s) for p in job.phases()] == [
        (True, 10.0),
        (False, 10.0),
        (True, 10.0),
        (False, 10.0),
        (True, 5.0),
        (False, 5.0),
    ]


def test_gpu_only_job_is_one_phase() -> None:
    assert SharedJob("j", 50.0, 1.0, 10.0, cycle_s=7.0).phases() == (Phase(True, 50.0),)


def test_from_spec_reads_working_set_and_gpu_fraction() -> None:
    spec = JobSpec(7, 0.0, "t", 1, 1000, 1.0, gpu_memory_mib=4096, gpu_time_fraction=0.5)
    job = SharedJob.from_spec(spec, solo_s=30.0)
    assert (job.name, job.working_set_mib, job.gpu_fraction, job.solo_s) == ("7", 4096, 0.5, 30)
