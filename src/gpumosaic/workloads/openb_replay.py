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

from dataclasses import fields, replace

import numpy as np
import numpy.typing as npt

from gpumosaic import cyclic_gc
from gpumosaic.errors import InputError
from gpumosaic.model.job import JobSpec
from gpumosaic.traces.openb import read_openb_trace
from gpumosaic.workloads.openb_options import OPTIONS as OPTIONS
from gpumosaic.workloads.openb_options import OpenbReplayOptions as OpenbReplayOptions
from gpumosaic.workloads.openb_options import parse_openb_replay
from gpumosaic.workloads.throughputs import ConstantThroughputs
from gpumosaic.workloads.workload import Workload


def openb_time_workload(spec: str, seed: int = 0) -> Workload:
    """``openb:NAME[,compress=K][,inflate=F][,pending=keep|drop]`` (or a CSV path)."""
    base, options = parse_openb_replay(spec)
    compress, inflate = options.compress, options.inflate
    keep_pending = options.pending == "keep"
    trace = read_openb_trace(base)
    if np.isnan(trace.times.creation_s).all():
        raise InputError(
            "this task list has no creation/deletion times; replay it with `gpumosaic fill`",
            path=trace.path,
        )
    pending = np.array(trace.times.pod_phase) == "Pending"
    kept = list(trace.jobs)
    if not keep_pending:
        kept = [job for job, is_pending in zip(kept, pending, strict=True) if not is_pending]
    # The trace as columns; JobSpecs are made once, each directly with its final values.
    arrival = np.array([job.arrival_s for job in kept], dtype=np.float64) / compress
    demand = np.array([job.gpu_demand for job in kept], dtype=np.float64)
    templates, picks = _inflated(demand, inflate, np.random.default_rng(seed))
    next_id = max((job.id for job in kept), default=-1) + 1
    ids = np.concatenate(
        [np.array([job.id for job in kept], dtype=np.int64), next_id + np.arange(len(picks))]
    )
    arrivals = np.concatenate([arrival, arrival[picks]])
    order = np.lexsort((ids, arrivals))  # by (arrival, id), as the simulators need
    with cyclic_gc.paused():  # ~100,000 JobSpecs, no cycles
        jobs = _job_specs(kept, arrivals.tolist(), templates.tolist(), order.tolist(), compress)
    dropped = int(pending.sum()) if not keep_pending else 0
    name = spec if not dropped else f"{spec} ({dropped} pending pods left out)"
    return Workload(name, jobs, ConstantThroughputs())


def _inflated(
    demand: npt.NDArray[np.float64], inflate: float, rng: np.random.Generator
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Extra pods: copies of sampled pods at the arrival times of other sampled pods, until
    the GPUs asked for reach ``inflate`` x those of the pods (``demand``: each pod's).
    Returns, per extra pod, the pod it copies and the pod whose arrival it takes.

    The draws alternate (copied pod, arrival pod) as one stream: ``rng.integers(n,
    size=k)`` gives the same numbers as k single draws, so drawing in chunks and
    stopping where the running total (summed one pod after another, as floats) first
    reaches the target gives the pods a draw-by-draw loop would."""
    n = len(demand)
    total = sum(demand.tolist())  # Python's left-to-right float sum, as the target's
    target = inflate * total
    templates: list[npt.NDArray[np.int64]] = []
    picks: list[npt.NDArray[np.int64]] = []
    mean = total / n if n else 0.0
    while total < target and n:
        chunk = int((target - total) / mean * 1.05) + 64 if mean > 0 else 1 << 16
        draws = rng.integers(n, size=2 * chunk)
        copied, arrival_of = draws[0::2], draws[1::2]
        running = np.cumsum(np.concatenate([[total], demand[copied]]))[1:]
        reached = np.flatnonzero(running >= target)
        count = int(reached[0]) + 1 if len(reached) else chunk
        templates.append(copied[:count])
        picks.append(arrival_of[:count])
        total = float(running[count - 1])
    if not templates:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(templates), np.concatenate(picks)


def _job_specs(
    kept: list[JobSpec],
    arrivals: list[float],
    templates: list[int],
    order: list[int],
    compress: float,
) -> tuple[JobSpec, ...]:
    """The replay's JobSpecs in ``order``: position ``i < len(kept)`` is pod ``kept[i]``
    at ``arrivals[i]``, later positions copy ``kept[templates[i - len(kept)]]`` under the
    next ids (named ``NAME+ID``). A copy takes every other field from its pod as it is
    (``dataclasses.fields``), in one positional constructor call."""
    n = len(kept)
    next_id = max((job.id for job in kept), default=-1) + 1
    names = [f.name for f in fields(JobSpec)]
    if names[:2] != ["id", "arrival_s"]:  # pragma: no cover - a change to JobSpec
        raise AssertionError("JobSpec's first fields must be id, arrival_s")
    pods = (
        kept
        if compress == 1.0
        else [  # x / 1.0 is x: the pods as read
            replace(job, arrival_s=arrival) for job, arrival in zip(kept, arrivals[:n], strict=True)
        ]
    )
    # The copies, made column by column: each field of the copied pod, in field order.
    columns = [
        list(map([getattr(job, name) for job in kept].__getitem__, templates)) for name in names[2:]
    ]
    ids = range(next_id, next_id + len(templates))
    at = names.index("name") - 2
    columns[at] = [f"{name}+{job_id}" for name, job_id in zip(columns[at], ids, strict=True)]
    copies = list(map(JobSpec, ids, arrivals[n:], *columns))
    every = [*pods, *copies]
    return tuple([every[i] for i in order])
