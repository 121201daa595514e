"""Offered load: how much GPU time a workload asks for against what the cluster has in
the time the jobs are offered, so that a first guess of 1 job/h on 12 GPUs is not
silently a 148-day run.

A job's GPU-hours are its GPU demand (num_gpu x gpu_milli / 1000) times its run time
alone on a GPU drawn from the cluster's mix (models weighted by GPU count; models the
job cannot run on are skipped). The jobs are offered over their *horizon*: from the
first arrival to the time the last job would finish if none ever waited (the latest
arrival + run time). Then

    offered load = total GPU-hours / (cluster GPUs x horizon hours)

Above 100% even a perfect scheduler makes jobs wait: the cluster has less GPU time in
the horizon than the jobs ask for. For a long stream (many jobs, arrivals far longer
than a job, or a stream: ``window=A-B``) the horizon is the arrival span and this is the
usual arrival rate x mean GPU-hours per job / GPUs; for a short list it stays
meaningful: two 1-hour jobs 10 s apart ask for 2 GPU-hours in about an hour (where the
rate alone, 360 jobs/h, made it tens of thousands of percent). A background load
(``--background``) holds its GPUs for the whole run: they count too
(``background_gpus``).
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
    jobs: int  # jobs that can run on the cluster (the others are not counted)
    gpu_hours: float  # their GPU-hours, in total
    arrival_span_h: float  # first to last arrival
    horizon_h: float  # first arrival to the last job's finish without waiting
    cluster_gpus: float
    # GPUs a background load holds for the whole run (--background): part of the load.
    background_gpus: float = 0.0
    stream: bool = False  # jobs keep arriving (window=A-B): the horizon is the arrival span

    @property
    def busy_gpus(self) -> float:
        """GPUs the jobs keep busy on average over the horizon (GPU-hours per hour)."""
        return self.gpu_hours / self.horizon_h

    @property
    def fraction(self) -> float:
        """The jobs' busy GPUs and the background's, against the cluster's GPUs."""
        return (self.busy_gpus + self.background_gpus) / self.cluster_gpus

    def line(self) -> str:
        background = (
            f" + {self.background_gpus:,.1f} held by the background" if self.background_gpus else ""
        )
        horizon = (
            "a stream: the arrival span" if self.stream else "the last one's finish if none waited"
        )
        return (
            f"offered load: {self.jobs:,} jobs arriving over {self.arrival_span_h:,.1f} h ask "
            f"for {self.gpu_hours:,.1f} GPU-h by {self.horizon_h:,.1f} h ({horizon}) = "
            f"{self.busy_gpus:,.1f}{background} of "
            f"{self.cluster_gpus:,.0f} GPUs busy ({self.fraction:.0%} of capacity)"
        )

    def warning(self) -> str:
        """Why jobs must wait, when the load is over 100%."""
        least_h = self.gpu_hours / self.cluster_gpus
        return (
            f"offered load {self.fraction:.0%} of capacity: the jobs ask for more GPU time "
            f"than the cluster has before the last one could finish, so jobs queue (all "
            f"their work takes at least {least_h:,.1f} h on every GPU; lower the rate or "
            "add GPUs)"
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
    """The workload's offered load on ``cluster`` (see the module doc); None when jobs do
    not arrive over time (all at once: a batch, whose length is its makespan) or no job
    can run anywhere."""
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
    run_hours = _run_hours(distinct, workload, counts, by_name)
    nan = float("nan")
    per_job_run = np.array([nan if h is None else h for h in run_hours])[which]
    per_job_gpu_h = np.array([_demand(j) for j in distinct])[which] * per_job_run
    usable = ~np.isnan(per_job_run)
    if not usable.any():
        return None
    ends = arrivals[usable] + per_job_run[usable] * 3600.0
    horizon_h = (float(ends.max()) - float(arrivals.min())) / 3600.0
    if not isinstance(workload.jobs, Sequence):
        # A stream (window=A-B): jobs keep arriving for as long as the run lasts, so the
        # sample's arrival span is the horizon (rate x GPU-hours per job / GPUs). The
        # sample's last finish would stretch it by the longest job, as if arrivals stopped.
        horizon_h = span / 3600.0
    return OfferedLoad(
        stream=not isinstance(workload.jobs, Sequence),
        jobs=int(usable.sum()),
        gpu_hours=float(per_job_gpu_h[usable].sum()),
        arrival_span_h=span / 3600.0,
        horizon_h=horizon_h,
        cluster_gpus=float(sum(counts.values())),
    )


def _demand(job: JobSpec) -> float:
    """GPUs a job holds (a fraction for milli-GPU jobs)."""
    return job.num_gpu * job.gpu_milli / MILLI_PER_GPU


def _gpu_hours(
    jobs: Sequence[JobSpec],
    workload: Workload,
    counts: dict[str, int],
    by_name: dict[str, GpuModel],
) -> list[float | None]:
    """GPU-hours of each job alone on the cluster's mix (``_run_hours`` x its demand);
    None where it runs on no model."""
    run_hours = _run_hours(jobs, workload, counts, by_name)
    return [_demand(j) * h if h is not None else None for j, h in zip(jobs, run_hours, strict=True)]


def _run_hours(
    jobs: Sequence[JobSpec],
    workload: Workload,
    counts: dict[str, int],
    by_name: dict[str, GpuModel],
) -> list[float | None]:
    """Hours each job runs alone on the cluster's mix (its run time on each model it can
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
            out[k] = value / 3600.0
    return out
