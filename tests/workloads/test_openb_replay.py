"""The openb time replay's workload: read once into columns, inflated with chunked draws,
each JobSpec made once. The reference below is the draw-by-draw loop it replaces
(``dataclasses.replace`` per pod); both must give the same jobs, in the same order."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from gpumosaic.model.job import JobSpec
from gpumosaic.traces.openb import read_openb_trace
from gpumosaic.workloads.openb_replay import _inflated, openb_time_workload


def reference_jobs(name: str, compress: float, inflate: float, keep_pending: bool, seed: int):
    trace = read_openb_trace(name)
    pending = np.array(trace.times.pod_phase) == "Pending"
    jobs = [
        replace(job, arrival_s=job.arrival_s / compress)
        for job, is_pending in zip(trace.jobs, pending, strict=True)
        if keep_pending or not is_pending
    ]
    rng = np.random.default_rng(seed)
    target = inflate * sum(j.gpu_demand for j in jobs)
    total = sum(j.gpu_demand for j in jobs)
    extra: list[JobSpec] = []
    next_id = max(j.id for j in jobs) + 1
    while total < target and jobs:
        template = jobs[int(rng.integers(len(jobs)))]
        arrival = jobs[int(rng.integers(len(jobs)))].arrival_s
        extra.append(
            replace(template, id=next_id, arrival_s=arrival, name=f"{template.name}+{next_id}")
        )
        total += template.gpu_demand
        next_id += 1
    jobs.extend(extra)
    jobs.sort(key=lambda j: (j.arrival_s, j.id))
    return jobs


@pytest.mark.parametrize(
    ("options", "compress", "inflate", "keep", "seed"),
    [
        ("", 1.0, 1.0, True, 0),
        (",inflate=1.3", 1.0, 1.3, True, 0),
        (",compress=20000,inflate=1.3", 20000.0, 1.3, True, 7),
        (",compress=3,inflate=2.5,pending=drop", 3.0, 2.5, False, 1),
    ],
)
def test_the_replay_workload_equals_the_draw_by_draw_reference(
    options: str, compress: float, inflate: float, keep: bool, seed: int
) -> None:
    workload = openb_time_workload(f"openb:default{options}", seed=seed)
    expected = reference_jobs("openb:default", compress, inflate, keep, seed)
    assert list(workload.jobs) == expected
    assert len(expected) > (8000 if keep else 7000)


def test_chunked_draws_stop_where_the_running_total_first_reaches_the_target() -> None:
    demand = np.array([0.5, 1.0, 0.0, 2.0, 0.25])
    templates, picks = _inflated(demand, 40.0, np.random.default_rng(3))
    rng = np.random.default_rng(3)
    total = sum(demand.tolist())
    target, expected = 40.0 * total, []
    while total < target:
        copied, arrival_of = int(rng.integers(5)), int(rng.integers(5))
        expected.append((copied, arrival_of))
        total += float(demand[copied])
    assert list(zip(templates.tolist(), picks.tolist(), strict=True)) == expected
    empty = _inflated(demand, 1.0, np.random.default_rng(3))
    assert len(empty[0]) == len(empty[1]) == 0
