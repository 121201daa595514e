"""The openb task list replayed in time (beyond the FGD paper's fill replay).

How the trace's times become arrivals and durations (see docs/openb_replay.md):

- arrival = ``creation_time``; duration = ``deletion_time - scheduled_time``: the time
  the pod really held its resources. In this trace Running pods also carry a deletion
  time; we take it as the end of their run like any other pod (the snapshot records
  it), so nothing is censored.
- Pending pods were never scheduled: their duration is ``deletion - creation`` (how long
  their owner kept asking). ``pending=drop`` leaves them out instead; they are then
  counted in the workload name, never dropped silently.
- Pods of the multigpu variants have no times: such files cannot be replayed in time
  (use the fill replay) and raise an InputError.
- ``compress=K`` divides every arrival time by K (durations unchanged), multiplying the
  arrival rate by K. The default trace's pods, even all at once, fit in the openb
  cluster, so contention also needs more pods: ``inflate=F`` appends pods sampled with
  replacement (seeded), each with the arrival time of another sampled pod, until the
  requested GPUs reach F x those of the trace (the fill replay's inflation, in time).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from gpumosaic.errors import InputError
from gpumosaic.model.job import JobSpec
from gpumosaic.options import parse_options
from gpumosaic.traces.openb import read_openb_trace
from gpumosaic.workloads.throughputs import ConstantThroughputs
from gpumosaic.workloads.workload import Workload

OPTIONS = ("compress", "inflate", "pending")  # OpenbReplayOptions' fields


@dataclass(frozen=True, slots=True)
class OpenbReplayOptions:
    """The options after ``openb:NAME,...`` (module doc)."""

    compress: float = 1.0
    inflate: float = 1.0
    pending: Literal["keep", "drop"] = "keep"

    def __post_init__(self) -> None:
        if not self.compress > 0:
            raise ValueError(f"compress must be a positive number, got {self.compress}")
        if not self.inflate >= 1:
            raise ValueError(f"inflate must be a number >= 1, got {self.inflate}")


def openb_time_workload(spec: str, seed: int = 0) -> Workload:
    """``openb:NAME[,compress=K][,inflate=F][,pending=keep|drop]`` (or a CSV path)."""
    base, _, rest = spec.partition(",")
    base = base.strip()
    options = parse_options(OpenbReplayOptions, rest, what="openb option", flag="--workload")
    compress, inflate = options.compress, options.inflate
    keep_pending = options.pending == "keep"
    trace = read_openb_trace(base)
    if np.isnan(trace.times.creation_s).all():
        raise InputError(
            "this task list has no creation/deletion times; replay it with `gpumosaic fill`",
            path=trace.path,
        )
    phases = np.array(trace.times.pod_phase)
    pending = phases == "Pending"
    jobs = [
        replace(job, arrival_s=job.arrival_s / compress)
        for job, is_pending in zip(trace.jobs, pending, strict=True)
        if keep_pending or not is_pending
    ]
    jobs.extend(_inflated(jobs, inflate, np.random.default_rng(seed)))
    jobs.sort(key=lambda j: (j.arrival_s, j.id))
    dropped = int(pending.sum()) if not keep_pending else 0
    name = spec if not dropped else f"{spec} ({dropped} pending pods left out)"
    return Workload(name, tuple(jobs), ConstantThroughputs())


def _inflated(jobs: list[JobSpec], inflate: float, rng: np.random.Generator) -> list[JobSpec]:
    """Extra pods: copies of sampled pods at the arrival times of other sampled pods."""
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
    return extra
