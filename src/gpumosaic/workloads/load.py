"""Offered load: how much GPU time a workload asks for per hour against what the cluster
has, so that a first guess of 1 job/h on 12 GPUs is not silently a 148-day run.

offered load = arrival rate (jobs/h) x mean GPU-hours per job / cluster GPUs, where a
job's GPU-hours are its GPU demand (num_gpu x gpu_milli / 1000) times its run time alone
on a GPU drawn from the cluster's mix (models weighted by GPU count; models the job
cannot run on are skipped). Above 100% the queue can only grow: the run measures a
backlog, not a steady state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter

import numpy as np

from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.gpu import MILLI_PER_GPU, GpuModel
from gpumosaic.model.job import JobSpec
from gpumosaic.workloads.workload import Workload


@dataclass(frozen=True, slots=True)
class OfferedLoad:
    jobs_per_hour: float
    gpu_hours_per_job: float
    cluster_gpus: float

    @property
    def busy_gpus(self) -> float:
        """GPUs the arrivals keep busy on average (GPU-hours per hour)."""
        return self.jobs_per_hour * self.gpu_hours_per_job

    @property
    def fraction(self) -> float:
        return self.busy_gpus / self.cluster_gpus

    def line(self) -> str:
        return (
            f"offered load: {self.jobs_per_hour:,.2f} jobs/h x {self.gpu_hours_per_job:,.2f} "
            f"GPU-h per job = {self.busy_gpus:,.1f} of {self.cluster_gpus:,.0f} GPUs busy "
            f"({self.fraction:.0%} of capacity)"
        )


# What a job's GPU-hours depend on: every field but id, name and arrival.
_DEMAND = attrgetter(
    "job_type",
    "num_gpu",
    "gpu_milli",
    "work",
    "cpu_milli",
    "memory_mib",
    "gpu_memory_mib",
    "gpu_time_fraction",
    "allowed_models",
    "priority_weight",
    "entity",
    "slo_s",
    "may_span_nodes",
)


def offered_load(workload: Workload, cluster: ClusterSpec) -> OfferedLoad | None:
    """The workload's offered load on ``cluster``; None when jobs do not arrive over time
    (all at once: a batch, whose length is its makespan) or no job can run anywhere."""
    jobs: Sequence[JobSpec] = workload.target_sample()
    if len(jobs) < 2:
        return None
    arrivals = np.array([j.arrival_s for j in jobs])
    span = float(arrivals.max() - arrivals.min())
    if span <= 0:
        return None
    counts = cluster.gpus_per_model()
    models = [node.gpu for node in cluster.nodes]
    by_name = {m.name: m for m in models}
    # A job's figure depends on what it asks for, not on its id, name or arrival: jobs
    # alike (an inflated trace repeats its pods) are worked out once.
    position: dict[tuple[object, ...], int] = {}
    distinct: list[JobSpec] = []
    which: list[int] = []
    for key, job in zip(map(_DEMAND, jobs), jobs, strict=True):
        k = position.get(key)
        if k is None:
            k = position[key] = len(distinct)
            distinct.append(job)
        which.append(k)
    hours = _gpu_hours(distinct, workload, counts, by_name)
    gpu_hours = [h for h in map(hours.__getitem__, which) if h is not None]
    if not gpu_hours:
        return None
    jobs_per_hour = (len(jobs) - 1) / span * 3600.0
    return OfferedLoad(jobs_per_hour, float(np.mean(gpu_hours)), float(sum(counts.values())))


def _gpu_hours(
    jobs: Sequence[JobSpec],
    workload: Workload,
    counts: dict[str, int],
    by_name: dict[str, GpuModel],
) -> list[float | None]:
    """GPU-hours of each job alone on the cluster's mix (its run time on each model it can
    use, averaged with the models' GPU counts as weights); None where it runs on no model.

    Jobs whose usable models are the same share one ``np.average`` computation, a row per
    job: the weighted sum ``(durations * weights).sum() / weights.sum()`` as ``np.average``
    does it, per row (the same products and the same per-row summation order)."""
    out: list[float | None] = [None] * len(jobs)
    groups: dict[tuple[int, ...], list[tuple[int, list[float]]]] = {}
    for k, job in enumerate(jobs):
        durations, weights = [], []
        for name, count in counts.items():
            try:
                rate = workload.throughputs.rate(job, by_name[name])
            except KeyError:  # a model the table does not measure (gavel: borrow=off)
                continue
            if rate > 0 and job.allows(name):
                durations.append(job.work / rate)
                weights.append(count)
        if durations:
            groups.setdefault(tuple(weights), []).append((k, durations))
    for usable, members in groups.items():
        wgt = np.asarray(usable)
        table = np.array([durations for _, durations in members], dtype=np.float64)
        scale = wgt.sum(dtype=np.float64)
        if scale == 0.0:
            np.average(table[0], weights=wgt)  # raises np.average's own error
        average = np.multiply(table, wgt, dtype=np.float64).sum(axis=1) / scale
        for (k, _), value in zip(members, average.tolist(), strict=True):
            job = jobs[k]
            out[k] = job.num_gpu * job.gpu_milli / MILLI_PER_GPU * (value / 3600.0)
    return out
