"""Tiresias' discretized two-dimensional LAS (2D-LAS), the standard non-LP baseline.

A job's priority is its attained service in GPU-seconds (GPUs x time: the "two
dimensions"), discretized into queues by ``thresholds_gpu_s``: queue 0 holds jobs below
the first threshold, queue i those in [threshold_{i-1}, threshold_i). Lower queues go
first; inside a queue, jobs go in arrival order (FIFO), so a job is demoted only when
it crosses a threshold and jobs of equal standing do not thrash.

Default: two queues split at 3,600 GPU-seconds (one GPU-hour). The Tiresias paper
(NSDI'19) finds two queues enough and tunes the threshold per workload; one GPU-hour
sits in the range it explores. Pass other thresholds for more queues.

Jobs are placed in priority order onto a GPU type with room for their whole demand
(``placement="fastest"``: the fastest such type; ``"most_free"``: the one with most free
GPUs, Tiresias being heterogeneity-unaware); a job that fits nowhere is skipped, so
smaller jobs behind it may still run (Tiresias does not block). Each running job gets a
row of X equal to 1 on its type.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpumosaic.policies.base import Allocation, IntArray, PolicyInput, PolicyTraits

_EPS = 1e-9


def las_queues(attained_gpu_s: np.ndarray, thresholds_gpu_s: tuple[float, ...]) -> IntArray:
    """Queue index of each job: how many thresholds its attained service has reached."""
    edges = np.asarray(sorted(thresholds_gpu_s), dtype=np.float64)
    return np.searchsorted(edges, np.asarray(attained_gpu_s, dtype=np.float64), side="right")


@dataclass(frozen=True, slots=True)
class Tiresias:
    name: str = "tiresias"
    thresholds_gpu_s: tuple[float, ...] = (3600.0,)
    placement: str = "fastest"

    @property
    def traits(self) -> PolicyTraits:
        return PolicyTraits()

    def allocate(self, inp: PolicyInput) -> Allocation:
        if self.placement not in ("fastest", "most_free"):
            raise ValueError(
                f"tiresias placement must be fastest or most_free, not {self.placement!r}"
            )
        queues = las_queues(inp.attained_service_s, self.thresholds_gpu_s)
        order = sorted(
            range(inp.num_jobs),
            key=lambda j: (int(queues[j]), float(inp.arrival_s[j]), inp.job_ids[j]),
        )
        free = np.asarray(inp.capacity, dtype=np.float64).copy()
        matrix = np.zeros((inp.num_jobs, len(inp.gpu_types)))
        for j in order:
            fits = np.flatnonzero((free >= inp.demand[j] - _EPS) & (inp.throughputs[j] > 0))
            if len(fits) == 0:
                continue
            if self.placement == "fastest":
                t = int(fits[np.argmax(inp.throughputs[j, fits])])
            else:
                t = int(fits[np.argmax(free[fits])])
            matrix[j, t] = 1.0
            free[t] -= inp.demand[j]
        notes = tuple(f"queue {q}: {int((queues == q).sum())} job(s)" for q in np.unique(queues))
        return Allocation(
            inp.job_ids, inp.gpu_types, matrix, objective=float(matrix.sum()), notes=notes
        )
