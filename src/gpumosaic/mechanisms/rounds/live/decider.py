"""The shared ``RoundDecider`` with the three things a live driver must tell it that a
simulator never does: a job left (cancelled or failed), a throughput was measured, and
(after a restart) how far a job already got. Each is a few lines on the decider's own
job table; the decisions themselves are the decider's, unchanged.

Priors (Gavel's estimation as the prior): a job whose ``job_type`` is in Gavel's table
starts with the table's rate on each GPU model the table measures; any other pair (job,
model) is unknown (NaN): the decider's throughput estimation (Gavel section 5,
``mechanisms/rounds/estimation.py``) profiles the job on the models it has not measured
and estimates the rest by matrix completion against Gavel's reference jobs. The rate
each job reports replaces the prior for that model from the next policy solve on.

Packed pairs (the ``_packed`` policies): the policy plans a pair with Gavel's packed
rates; each member's rate measured while it ran packed (``observe_pair_rate``) replaces
the table's rate of that member in that pair, on that model, from the next solve on.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpumosaic.mechanisms.rounds.decision import RoundDecider
from gpumosaic.model.gpu import MILLI_PER_GPU, GpuModel
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import Assignment
from gpumosaic.policies.base import PackedPairs
from gpumosaic.results.outcome import Outcome
from gpumosaic.workloads.throughputs import GavelThroughputTable

# The holder id a node that went away is held by in the cluster state (below every job
# row, which is >= 0, and every packed pair's holder id, which is > -2**62).
_AWAY_HOLDER_BASE = -(2**62)
_PINNED_HOLDER_BASE = -(2**61)  # - row * 64 - part: a pinned job's GPUs


class PriorThroughputs:
    """Gavel's table where it knows the job type and model; NaN (unknown: the decider's
    estimation fills it) elsewhere. (``workloads.throughputs.UNMEASURED_PRIOR_STEPS_PER_S`` is the
    placeholder of Gandiva's live rates only: the rounds estimate instead.)"""

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
        return float("nan")


def estimation_metrics(decider: RoundDecider) -> dict[str, float]:
    """The decider's throughput estimation as ``/metrics`` values (none without one;
    an error median of -1: no estimate has been checked against a measurement yet)."""
    if decider.estimation is None:
        return {}
    r = decider.estimation.report()
    error = r.estimate_error_median
    return {
        "estimation_profiled_jobs_total": r.profiled_jobs,
        "estimation_profiling_rounds_total": r.profiling_rounds,
        "estimation_estimated_entries_total": r.estimated_entries,
        "estimation_still_estimated": r.still_estimated,
        "estimation_checked_estimates_total": r.checked_estimates,
        "estimation_error_median": -1.0 if np.isnan(error) else error,
    }


class LiveRoundDecider(RoundDecider):
    """``RoundDecider`` plus withdraw / observe_rate / restore_progress (see module doc),
    and nodes that go away and come back (``take_out`` / ``put_back``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.nodes_away: set[int] = set()
        self.pinned: dict[int, tuple[int, list[Assignment]]] = {}  # row -> type, parts
        # Packed pairs: (row, partner's row, type) -> the row's measured steps/s packed
        # with the partner; the solve's pair candidates come from the table's rates.
        self.pair_rates: dict[tuple[int, int, int], float] = {}
        self.book.pair_rates = self.measured_pairs
        if isinstance(self.throughputs, PriorThroughputs):
            self.book.pair_table = self.throughputs.table

    def take_out(self, nodes: set[int]) -> None:
        """Nodes went away (their Ray node is lost): the leases on them end, their GPUs
        are held by a placeholder so no placement picks them, and the policy re-solves
        for the GPUs left. The job rows keep their progress (the driver requeues them)."""
        nodes = nodes - self.nodes_away
        if not nodes:
            return
        self.leases.release_on(nodes)
        state = self.state
        for node in sorted(nodes):
            count = int(state.num_gpus[node])
            state.allocate(
                Assignment(_AWAY_HOLDER_BASE - node, node, tuple(range(count)), MILLI_PER_GPU, 0, 0)
            )
            t = int(state.node_model[node])
            self.capacity_gpus[t] -= count  # the allocation book reads the same array
            self.capacity_milli[t] -= count * MILLI_PER_GPU
        self.nodes_away |= nodes
        self.need_solve = True

    def put_back(self, nodes: set[int]) -> None:
        """Nodes came back: their GPUs are placeable again and the policy re-solves."""
        nodes = nodes & self.nodes_away
        state = self.state
        for node in sorted(nodes):
            state.release(_AWAY_HOLDER_BASE - node)
            count = int(state.num_gpus[node])
            t = int(state.node_model[node])
            self.capacity_gpus[t] += count
            self.capacity_milli[t] += count * MILLI_PER_GPU
        self.nodes_away -= nodes
        if nodes:
            self.need_solve = True

    def pin(self, row: int) -> bool:
        """A non-preemptible job's lease started (``JobSubmission.preemptible``): it keeps
        its GPUs until its process ends. Its lease becomes a placeholder holding the
        same GPUs (as a lost node's), the policy solves without it and the GPUs, and it
        is never planned (so never stopped) until ``unpin``. False: it holds no single
        lease (a packed pair's member), nothing changed."""
        parts = self.leases.holding(row)
        held_type = self.leases.held_type(row)
        if parts is None or held_type < 0 or not self.jobs.is_active[row]:
            return False
        self.leases.release_row(row)
        kept = []
        for k, part in enumerate(parts):
            holder = _PINNED_HOLDER_BASE - row * 64 - k
            kept.append(Assignment(holder, part.node, part.gpus, part.gpu_milli, 0, 0))
            self.state.allocate(kept[-1])
        milli = sum(p.gpu_milli * len(p.gpus) for p in parts)
        self.capacity_milli[held_type] -= milli
        self.capacity_gpus[held_type] -= milli / MILLI_PER_GPU
        self.pinned[row] = (held_type, kept)
        self.jobs.set_aside(row)
        self.need_solve = True
        return True

    def unpin(self, row: int) -> None:
        """The pinned job's process ended: its GPUs are free and it is active again (its
        end, if it has one, follows through ``withdraw``)."""
        held_type, kept = self.pinned.pop(row, (-1, []))
        if held_type < 0:
            return
        for part in kept:
            self.state.release(part.job_id)
        milli = sum(p.gpu_milli * len(p.gpus) for p in kept)
        self.capacity_milli[held_type] += milli
        self.capacity_gpus[held_type] += milli / MILLI_PER_GPU
        self.jobs.activate_many([row])
        self.need_solve = True

    def withdraw(self, row: int, now: float, outcome: Outcome) -> None:
        """The job left for good, ``outcome`` typed: done outside a planned round (all
        its steps reported), failed or cancelled (recorded as such, never as completed).
        It is no longer active, its cached placements are dropped, and the policy
        re-solves without it."""
        if not self.jobs.is_active[row]:
            return
        if outcome is Outcome.COMPLETED:
            self.jobs.complete([row], [now])
        else:
            self.jobs.withdraw(row, now, outcome)
        self.leases.forget([row])
        self.need_solve = True

    def all_steps_done(self, row: int) -> bool:
        """A round's report counted every step of the job: it will never be planned again,
        so its process is done even if it did not end cleanly."""
        jobs = self.jobs
        return bool(not jobs.is_active[row] and jobs.done_steps[row] >= jobs.total_steps[row])

    def process_ended(self, row: int, now: float, *, outcome: Outcome, in_round: bool) -> None:
        """The job's last process ended (``outcome``: completed, failed or cancelled). A
        completed job of the round in progress is credited by that round's report; any
        other leaves now, with its outcome."""
        if outcome is not Outcome.COMPLETED or not in_round:
            self.withdraw(row, now, outcome)

    def restore_progress(self, row: int, done_steps: float) -> None:
        """A restarted service re-admits a job that had already made progress."""
        self.jobs.done_steps[row] = min(done_steps, float(self.jobs.total_steps[row]))

    def rates_of(self, row: int) -> np.ndarray:
        return np.array(self.jobs.rates[row])

    # ---- packed pairs (Gavel's space sharing) ----------------------------------------

    def observe_pair_rate(
        self, row: int, partner_row: int, type_index: int, steps_per_s: float
    ) -> None:
        """A member of a packed pair measured its rate packed with ``partner_row``: it
        replaces the table's rate of that member in that pair from the next solve on (as
        ``observe_rate``: read by the next solve, never asking for one)."""
        if 0 < steps_per_s < float("inf"):
            self.pair_rates[(row, partner_row, type_index)] = steps_per_s

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
