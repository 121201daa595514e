"""Gavel's ``fifo`` exactly as its published numbers were produced, flaw included.

Reading Gavel's FIFO policy (``policies/fifo.py``, base mode) shows that the GPU type it
draws at random for a queued job is never used: the job is recorded on whatever type a
loop variable last held, which is the last type of the cluster in sorted order
(``v100`` for v100/p100/k80). Every queued job is therefore allocated to V100 (the
per-type free count goes negative and never stops the loop), P100s and K80s idle, and the
oversubscribed V100s are time-shared by the round mechanism. That is why Gavel reports
58.76 h avg JCT for ``fifo`` on minimize_makespan.trace against 10-20 h for every other
policy. gpumosaic's ``fifo`` policy does what the code meant (a random type with room);
this class re-implements the behaviour as shipped, only to show that the round mechanism
reproduces Gavel's number once fed the same allocations. Not registered as a policy.

Other details kept from Gavel's FIFO: a type a job got stays its type while it runs; a
finished job's type is first offered to the head of the queue, checked against a free
count that has not yet subtracted the jobs listed after it (so it may oversubscribe),
and a head that does not fit is skipped for that call.
"""

from __future__ import annotations

import random

import numpy as np

from gpumosaic.policies.base import Allocation, PolicyInput


class GavelShippedFifo:
    def __init__(self, seed: int = 0) -> None:
        self._rng = random.Random(seed)
        self._type_of: dict[int, str] = {}  # job id -> type name

    @property
    def name(self) -> str:
        return "fifo"  # the mechanism treats it as FIFO (skips zero priorities)

    def allocate(self, inp: PolicyInput) -> Allocation:
        types = list(inp.gpu_types)
        free = {t: int(c) for t, c in zip(types, inp.capacity, strict=True)}
        scale = {j: int(s) for j, s in zip(inp.job_ids, inp.scale_factors, strict=True)}
        active = set(inp.job_ids)
        queue = [j for j in sorted(inp.job_ids) if j not in self._type_of]
        for job_id in sorted(self._type_of):
            gpu_type = self._type_of[job_id]
            if job_id in active:
                free[gpu_type] -= scale[job_id]
                continue
            if queue:  # offer the finished job's type to the head of the queue
                head = queue.pop(0)
                if scale[head] <= free[gpu_type]:
                    self._type_of[head] = gpu_type
                    free[gpu_type] -= scale[head]
            del self._type_of[job_id]
        by_name = sorted(types, key=str.lower)
        stale = by_name[-1]  # the loop variable's last value
        open_types = [t for t in by_name if free[t] > 0]
        while queue and open_types:
            job_id = queue.pop(0)
            fits = [t for t in open_types if free[t] >= scale[job_id]]
            if not fits:
                break
            drawn = fits[self._rng.randrange(len(fits))]
            self._type_of[job_id] = stale
            free[stale] -= scale[job_id]
            if free[stale] == 0:
                open_types.remove(drawn)
        matrix = np.zeros((inp.num_jobs, len(types)))
        for row, job_id in enumerate(inp.job_ids):
            if job_id in self._type_of:
                matrix[row, types.index(self._type_of[job_id])] = 1.0
        return Allocation(inp.job_ids, inp.gpu_types, matrix)
