"""Measured step rates, as the decider sees them: the input of introspection.

A driver reports each running job's rate (steps/s) as it measures it: the live driver
from the jobs' lease reports, the simulator from its progress model. A rate is filed
under the job's configuration when it was reported: its GPU model, and its partner when
packed. Introspection compares a pair's rates with each member's rate alone on that GPU
model: measured if the job ever reported one there, else the rate model's estimate (the
throughput table). A pair judged with no measured rate for a member falls back to the
table's pair estimate, and that is counted (``Fallback.UNMEASURED_PAIR``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpumosaic.fallbacks import Fallback, Fallbacks
from gpumosaic.mechanisms.gandiva.rates import RateModel
from gpumosaic.model.gpu import GpuModel

if TYPE_CHECKING:
    from gpumosaic.mechanisms.gandiva.group import GandivaJob

# (GPU model name, partner job id or -1 when alone), per job -> steps/s
RateKey = tuple[str, int]


class RateBook:
    def __init__(self, rates: RateModel) -> None:
        self._model = rates
        self._measured: dict[int, dict[RateKey, float]] = {}
        self.fallbacks = Fallbacks()

    def observe(self, job_id: int, gpu: str, partner: int, steps_per_s: float) -> None:
        if not math.isfinite(steps_per_s) or steps_per_s < 0:
            # A driver validates its reports where they come in; this is a broken caller.
            raise ValueError(f"job {job_id}: a rate must be finite and >= 0, not {steps_per_s}")
        self._measured.setdefault(job_id, {})[(gpu, partner)] = steps_per_s

    def measured(self, job_id: int, gpu: str, partner: int = -1) -> float | None:
        rates = self._measured.get(job_id)
        return None if rates is None else rates.get((gpu, partner))

    def forget(self, job_id: int) -> None:
        """Drop a finished job's rates."""
        self._measured.pop(job_id, None)

    def gain(self, jobs: Sequence[GandivaJob], gpu: GpuModel) -> float:
        """Sum of a pair's normalized rates (packed / alone): above 1 the pair beats
        time-slicing the two."""
        a, b = jobs
        packed_a = self.measured(a.id, gpu.name, b.id)
        packed_b = self.measured(b.id, gpu.name, a.id)
        if packed_a is None or packed_b is None:
            self.fallbacks += Fallbacks.of(Fallback.UNMEASURED_PAIR)
            estimate = self._model.pair(a.spec, b.spec, gpu) or (0.0, 0.0)
            packed_a = estimate[0] if packed_a is None else packed_a
            packed_b = estimate[1] if packed_b is None else packed_b
        rates = (packed_a, packed_b)
        alone = tuple(self._alone(j, gpu) for j in jobs)
        return sum(r / a for r, a in zip(rates, alone, strict=True))

    def _alone(self, job: GandivaJob, gpu: GpuModel) -> float:
        measured = self.measured(job.id, gpu.name)
        if measured is not None and measured > 0:
            return measured
        return self._model.alone(job.spec, gpu)
