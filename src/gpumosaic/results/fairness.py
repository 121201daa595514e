"""Fairness of a run, per job and summarized: slowdown, finish-time fairness, Jain's index.

Definitions (docs/metrics.md has them for readers):

- **slowdown** of a completed job = JCT / ``alone_s``, the time it would have taken
  alone on its first GPU model (1 = no waiting, no sharing penalty).
- **finish-time fairness** rho (Themis, NSDI'20; Gavel's ``finish_time_fairness``) =
  JCT / T_fair, where T_fair is the job's time with an equal 1/n share of the cluster:
  n is the time-averaged number of jobs in the system (arrived, not finished) while the
  job was there, so the job's share is C/n GPUs of a C-GPU cluster, and a job needing g
  GPUs runs at min(1, (C/n)/g) of its speed: T_fair = alone_s * max(1, n * g / C).
  rho <= 1: the job did at least as well as under equal sharing.
- **Jain's index** over the jobs' normalized progress x = 1 / slowdown:
  (sum x)^2 / (k * sum x^2), 1 when every job is slowed equally, 1/k at worst.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.results.columns import JobColumns
from gpumosaic.results.result import JobRecord

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Fairness:
    """Over measured, completed jobs with a known alone time; NaN when there are none."""

    slowdown_p99: float
    slowdown_max: float
    ftf_rho_mean: float
    ftf_rho_max: float
    jain_index: float


def mean_contention(
    arrival_s: FloatArray, finish_s: FloatArray, end_s: float, starts: FloatArray, stops: FloatArray
) -> FloatArray:
    """Time-averaged number of jobs present (arrived, not finished) over each interval
    [starts[i], stops[i]]. ``finish_s`` is NaN for a job still there at ``end_s``."""
    finish = np.where(np.isnan(finish_s), end_s, finish_s)
    times = np.concatenate([arrival_s, finish])
    steps = np.concatenate([np.ones(len(arrival_s)), -np.ones(len(finish))])
    order = np.argsort(times, kind="stable")
    times, present = times[order], np.cumsum(steps[order])
    # Integral of the step function N(t) from times[0] to each breakpoint.
    area = np.concatenate([[0.0], np.cumsum(present[:-1] * np.diff(times))])

    def integral(t: FloatArray) -> FloatArray:
        i = np.searchsorted(times, t, side="right") - 1
        i = np.clip(i, 0, len(times) - 1)
        below = t < times[0]
        value = area[i] + present[i] * (t - times[i])
        return np.where(below, 0.0, value)

    width = stops - starts
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (integral(stops) - integral(starts)) / width
    return np.where(width > 0, mean, 1.0)


def fairness(records: tuple[JobRecord, ...], total_gpu_milli: int, end_s: float) -> Fairness:
    return fairness_of(JobColumns.of(records), total_gpu_milli, end_s)


def fairness_of(jobs: JobColumns, total_gpu_milli: int, end_s: float) -> Fairness:
    """``fairness`` from the records' columns (``results/columns.py``)."""
    nan = Fairness(math.nan, math.nan, math.nan, math.nan, math.nan)
    if not len(jobs) or total_gpu_milli <= 0:
        return nan
    keep = jobs.slowdown_jobs
    if not keep.any():
        return nan
    arrival, finish = jobs.arrival_s, jobs.finish_s
    alone = jobs.alone_s[keep]
    jct = finish[keep] - arrival[keep]
    slowdown = jct / alone
    present = mean_contention(arrival, finish, end_s, arrival[keep], finish[keep])
    demand = jobs.demand_gpus[keep]
    cluster_gpus = total_gpu_milli / MILLI_PER_GPU
    t_fair = alone * np.maximum(1.0, present * demand / cluster_gpus)
    rho = jct / t_fair
    progress = 1.0 / slowdown
    jain = float(progress.sum() ** 2 / (len(progress) * (progress**2).sum()))
    return Fairness(
        slowdown_p99=float(np.percentile(slowdown, 99)),
        slowdown_max=float(slowdown.max()),
        ftf_rho_mean=float(rho.mean()),
        ftf_rho_max=float(rho.max()),
        jain_index=jain,
    )
