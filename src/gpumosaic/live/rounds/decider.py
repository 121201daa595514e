"""The shared ``RoundDecider`` with the three things a live driver must tell it that a
simulator never does: a job left (cancelled or failed), a throughput was measured, and
(after a restart) how far a job already got. Each is a few lines on the decider's own
job table; the decisions themselves are the decider's, unchanged.

Priors (Gavel's estimation as the prior): a job whose ``job_type`` is in Gavel's table
starts with the table's rate on each GPU model the table measures; any other pair (job,
model) starts at ``UNMEASURED_PRIOR_STEPS_PER_S`` and is counted as unmeasured. The rate
each job reports replaces the prior for that model from the next policy solve on.
"""

from __future__ import annotations

import numpy as np

from gpumosaic.mechanisms.rounds.decision import RoundDecider
from gpumosaic.model.gpu import GpuModel
from gpumosaic.model.job import JobSpec
from gpumosaic.workloads.throughputs import GavelThroughputTable

# A placeholder, not a calibration: every unmeasured job gets the same rate, so the
# policy splits time evenly until the jobs report their own rates (a lease granted on
# an unmeasured rate is bounded by time only, see ``driver``).
UNMEASURED_PRIOR_STEPS_PER_S = 1.0


class PriorThroughputs:
    """Gavel's table where it knows the job type and model; the placeholder elsewhere."""

    def __init__(self, table: GavelThroughputTable | None) -> None:
        self.table = table

    def known(self, job: JobSpec, gpu: GpuModel) -> bool:
        t = self.table
        return (
            t is not None
            and gpu.throughput_key is not None
            and t.has(job.job_type, max(job.num_gpu, 1), gpu.throughput_key)
        )

    def rate(self, job: JobSpec, gpu: GpuModel) -> float:
        if self.table is not None and self.known(job, gpu):
            assert gpu.throughput_key is not None
            return self.table.isolated(job.job_type, max(job.num_gpu, 1), gpu.throughput_key)
        return UNMEASURED_PRIOR_STEPS_PER_S


class LiveRoundDecider(RoundDecider):
    """``RoundDecider`` plus withdraw / observe_rate / restore_progress (see module doc)."""

    def withdraw(self, row: int, now: float) -> None:
        """The job left for good (cancelled, failed): it is no longer active, its cached
        placements are dropped, and the policy re-solves without it."""
        if not self.jobs.is_active[row]:
            return
        self.jobs.complete([row], [now])
        self.leases.forget([row])
        self.need_solve = True

    def observe_rate(self, row: int, type_index: int, steps_per_s: float) -> None:
        """A measured rate replaces the estimate; the next solve uses it (and only then the
        step budgets, which come from the allocation's entity table)."""
        if steps_per_s > 0 and self.jobs.rates[row, type_index] != steps_per_s:
            self.jobs.rates[row, type_index] = steps_per_s
            self.need_solve = True

    def restore_progress(self, row: int, done_steps: float) -> None:
        """A restarted service re-admits a job that had already made progress."""
        self.jobs.done_steps[row] = min(done_steps, float(self.jobs.total_steps[row]))

    def rates_of(self, row: int) -> np.ndarray:
        return np.array(self.jobs.rates[row])
