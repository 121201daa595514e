"""The allocation in force and Gavel's accounting of it, re-built at every policy solve.

One owner (``AllocationBook``) holds the policy, the entity table of the current
allocation (``priorities.EntityTable``), the deficits carried from one solve to the
next, and the solve counters. The round decider decides *when* to solve; this module
does the solve: build the PolicyInput (with candidate pairs for packing policies), call
the policy, and turn the Allocation into entities with a fresh accounting period.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from gpumosaic.fallbacks import Fallback, Fallbacks
from gpumosaic.mechanisms.rounds.jobs import JobStore
from gpumosaic.mechanisms.rounds.policy_input import build_policy_input, candidate_pairs
from gpumosaic.mechanisms.rounds.priorities import EntityTable, reset_accounting
from gpumosaic.model.gpu import GpuModel
from gpumosaic.policies.base import Allocation, PackedPairs, PairCandidates, Policy, PolicyInput
from gpumosaic.policies.isolated import Isolated
from gpumosaic.policies.lp_solve import PolicySolveError
from gpumosaic.workloads.throughputs import GavelThroughputTable, Throughputs

log = logging.getLogger(__name__)


class AllocationBook:
    def __init__(
        self,
        policy: Policy,
        models: Sequence[GpuModel],
        capacity_gpus: np.ndarray,
        round_s: float,
        pair_partners: int,
    ) -> None:
        self.policy = policy
        self.models = tuple(models)
        self.type_names = tuple(m.name for m in models)
        self.capacity_gpus = capacity_gpus
        # Gavel credits every entity half a round on every type at each reset.
        self.credit_s = round_s / 2.0
        self.pair_partners = pair_partners
        self.pairs = policy.traits.pairs
        # Gavel measured packed rates only on its own models (V100, P100, K80).
        self.packed_rates = all(m.throughput_key is not None for m in self.models)
        self.entities: EntityTable | None = None
        # Deficits carried into the next table: sorted entity keys and their (K, T) rows.
        self.deficits: tuple[np.ndarray, np.ndarray] = (
            np.zeros(0, dtype=np.int64),
            np.zeros((0, len(models))),
        )
        self.last_reset_s = 0.0
        # When the first solve was (None before it): Gavel re-solves on any change while
        # every reset so far is the run's first (``RoundDecision.solve_due``).
        self.first_reset_s: float | None = None
        self.solves = 0
        self.solve_s = 0.0
        self.fallbacks = Fallbacks()  # the policy's, summed over solves
        # The live service's: Gavel's table for packed rates when the decider's own
        # throughputs are not the table (its priors), and its measured pair rates over
        # the table's ((rows of the solve, candidates) -> candidates; None: the table's).
        self.pair_table: GavelThroughputTable | None = None
        self.pair_rates: Callable[[np.ndarray, PackedPairs], PackedPairs] | None = None

    def solve(
        self,
        now: float,
        jobs: JobStore,
        throughputs: Throughputs,
        adjust: Callable[[EntityTable], EntityTable] | None = None,
    ) -> None:
        """Re-solve for the active jobs and start a new accounting period at ``now``.
        ``adjust``: applied to the new entity table (the decider's throughput estimation
        moves a profiling job's time to the models it has not measured)."""
        if self.entities is not None:
            self._carry_deficits(now, jobs)
        rows = np.array(jobs.active_rows, dtype=np.int64)
        packed = None
        pairs = self.pairs
        pair_source = (
            throughputs if isinstance(throughputs, GavelThroughputTable) else self.pair_table
        )
        if pairs is not PairCandidates.NONE and pair_source is not None and len(rows) > 1:
            if self.packed_rates:
                keys = [m.throughput_key for m in self.models]
                specs = [jobs.specs[r] for r in rows.tolist()]
                top_k = len(rows) if pairs is PairCandidates.ALL else self.pair_partners
                packed = candidate_pairs(specs, pair_source, keys, top_k)
                if packed is not None and self.pair_rates is not None:
                    packed = self.pair_rates(rows, packed)
            else:
                # Packed rates exist only for measured models (none are borrowed): this
                # solve runs without pairs, as ``*_perf`` would; counted, never silent.
                self.fallbacks += Fallbacks.of(Fallback.PACKED_RATES_MISSING)
        inp = build_policy_input(
            rows, jobs.columns(), self.type_names, self.capacity_gpus, now, packed
        )
        t0 = time.perf_counter()
        allocation = self._allocate(inp)
        self.solve_s += time.perf_counter() - t0
        self.solves += 1
        if allocation.fallbacks:
            self.fallbacks += allocation.fallbacks
        table = self._entity_table(rows, allocation, jobs)
        self.entities = table if adjust is None else adjust(table)
        self.last_reset_s = now
        if self.first_reset_s is None:
            self.first_reset_s = now

    def _allocate(self, inp: PolicyInput) -> Allocation:
        """The policy's allocation; if its solve fails (a solver error, numerical trouble),
        Gavel's isolated shares instead: always feasible, counted as a fallback and logged
        once, so one bad solve never stops a simulation or the live service."""
        try:
            return self.policy.allocate(inp)
        except PolicySolveError as err:
            if not self.fallbacks.count(Fallback.POLICY_SOLVE_FAILED):
                log.warning(
                    "%s: %s; isolated shares used (counted in fallbacks)", self.policy.name, err
                )
            fallback = Isolated().allocate(inp)
            note = f"{self.policy.name}: {err}; used the isolated allocation"
            return replace(
                fallback, notes=(note,), fallbacks=Fallbacks.of(Fallback.POLICY_SOLVE_FAILED)
            )

    def _carry_deficits(self, now: float, jobs: JobStore) -> None:
        ent = self.entities
        assert ent is not None
        carried = reset_accounting(ent, now - self.last_reset_s, self.credit_s)
        active = jobs.is_active
        alive = active[ent.rows_a]
        if ent.has_pairs:  # a pair lives while both its jobs do
            alive &= (ent.rows_b < 0) | active[np.maximum(ent.rows_b, 0)]
        keys = _entity_keys(ent.rows_a[alive], ent.rows_b[alive])
        order = keys.argsort(kind="stable")
        self.deficits = (keys[order], carried[alive][order])

    def _entity_table(self, rows: np.ndarray, alloc: Allocation, jobs: JobStore) -> EntityTable:
        n_types = len(self.models)
        n = len(rows)
        ra = rows
        rb = np.full(n, -1, dtype=np.int64)
        x = np.asarray(alloc.matrix, dtype=np.float64).reshape(n, n_types)
        rate_a = jobs.rates[rows]
        rate_b = np.zeros((n, n_types))
        demand = jobs.demand_milli[rows]
        if alloc.pair_matrix is not None and alloc.packed is not None and len(alloc.packed.pairs):
            pa = rows[alloc.packed.pairs[:, 0]]
            pb = rows[alloc.packed.pairs[:, 1]]
            ra = np.concatenate([ra, pa])
            rb = np.concatenate([rb, pb])
            x = np.concatenate([x, np.asarray(alloc.pair_matrix, dtype=np.float64)])
            rate_a = np.concatenate([rate_a, alloc.packed.throughputs[:, :, 0]])
            rate_b = np.concatenate([rate_b, alloc.packed.throughputs[:, :, 1]])
            # A pair shares the GPUs of its members (equal scale factors, whole GPUs).
            pair_demand = np.maximum(jobs.demand_milli[pa], jobs.demand_milli[pb])
            demand = np.concatenate([demand, pair_demand])
        deficit = np.zeros((len(ra), n_types))
        known, carried = self.deficits
        if len(known):
            keys = _entity_keys(ra, rb)
            at = np.minimum(known.searchsorted(keys), len(known) - 1)
            hit = known[at] == keys
            deficit[hit] = carried[at[hit]]
        return EntityTable(
            rows_a=ra,
            rows_b=rb,
            x=x,
            time=np.full((len(ra), n_types), self.credit_s),
            deficit=deficit,
            rate_a=rate_a,
            rate_b=rate_b,
            demand_milli=np.asarray(demand, dtype=np.int64),
            type_total=np.full(n_types, self.credit_s * len(ra)),
        )


def _entity_keys(rows_a: np.ndarray, rows_b: np.ndarray) -> np.ndarray:
    """One int64 per entity (job rows a, b; b = -1 for a single job), for lookups."""
    keys: np.ndarray = np.asarray(rows_a, dtype=np.int64) * (1 << 31) + (np.asarray(rows_b) + 1)
    return keys
