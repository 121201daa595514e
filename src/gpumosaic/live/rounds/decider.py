"""The shared ``RoundDecider`` with the three things a live driver must tell it that a
simulator never does: a job left (cancelled or failed), a throughput was measured, and
(after a restart) how far a job already got. Each is a few lines on the decider's own
job table; the decisions themselves are the decider's, unchanged.

Priors (Gavel's estimation as the prior): a job whose ``job_type`` is in Gavel's table
starts with the table's rate on each GPU model the table measures; any other pair (job,
model) starts at ``UNMEASURED_PRIOR_STEPS_PER_S`` and is counted as unmeasured. The rate
each job reports replaces the prior for that model from the next policy solve on.

Packed pairs (the ``_packed`` policies): the policy plans a pair with Gavel's packed
rates; each member's rate measured while it ran packed (``observe_pair_rate``) replaces
the table's rate of that member in that pair, on that model, from the next solve on.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpumosaic.mechanisms.rounds.decision import RoundDecider
from gpumosaic.model.gpu import GpuModel
from gpumosaic.model.job import JobSpec
from gpumosaic.policies.base import PackedPairs
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

    # ---- packed pairs (Gavel's space sharing) ----------------------------------------

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # (row, partner's row, type) -> the row's measured steps/s packed with the partner
        self.pair_rates: dict[tuple[int, int, int], float] = {}
        self.book.pair_rates = self.measured_pairs
        if isinstance(self.throughputs, PriorThroughputs):  # pairs: the table's rates
            self.book.pair_table = self.throughputs.table

    def observe_pair_rate(
        self, row: int, partner_row: int, type_index: int, steps_per_s: float
    ) -> None:
        """A member of a packed pair measured its rate packed with ``partner_row``: it
        replaces the table's rate of that member in that pair from the next solve on
        (and, as ``observe_rate``, a changed rate asks for that solve)."""
        key = (row, partner_row, type_index)
        if steps_per_s > 0 and self.pair_rates.get(key) != steps_per_s:
            self.pair_rates[key] = steps_per_s
            self.need_solve = True

    def measured_pairs(self, rows: np.ndarray, packed: PackedPairs) -> PackedPairs:
        """The solve's candidate pairs (``packed.pairs`` index ``rows``) with each
        measured member rate in place of the table's."""
        if not self.pair_rates:
            return packed
        rates = packed.throughputs.copy()
        members = rows[packed.pairs]
        for (row, partner, t), rate in self.pair_rates.items():
            for side in (0, 1):
                hit = (members[:, side] == row) & (members[:, 1 - side] == partner)
                rates[hit, t, side] = rate
        return PackedPairs(packed.pairs, rates)
