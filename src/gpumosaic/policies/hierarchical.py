"""Hierarchical max-min fairness by water filling (Gavel's ``max_min_fairness_water_filling*``).

Normalized throughput n_j(X) = rate_j(X) / prop_j (``proportional_throughputs``). Each
round raises, as far as possible and in proportion to the job weights, the normalized
throughput of every job that is not yet frozen, keeping every job at or above what it
already has:

1. weights: with entities, an entity's weight is split over its unfrozen jobs, either in
   proportion to their priority weights (``"fairness"``) or all to its earliest job
   (``"fifo"``); without entities, jobs keep their priority weights;
2. LP: maximize c s.t. (sf_j / w_j) (n_j(X) - level_j) >= c for the active jobs (w_j > 0,
   not frozen), n_j(X) >= level_j (or the frozen value) for every job; then
   level_j += c w_j / sf_j;
3. bottleneck MILP (HiGHS): maximize the number of active jobs whose n_j can still rise
   above level_j * slack with nobody dropping below their floor (big-M indicators);
   active jobs that cannot are frozen at level_j.

It stops when every job is frozen or a round freezes nobody. A failed bottleneck MILP
freezes every active job (so the loop ends) and a failed LP after the first round keeps
the previous X: both are counted in ``Allocation.notes`` (``fallbacks=N``), never silent.
A failed first LP raises PolicySolveError.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from gpumosaic.fallbacks import Fallback, Fallbacks
from gpumosaic.policies.base import (
    Allocation,
    FloatArray,
    PackedPairs,
    PolicyInput,
    PolicyTraits,
    lp_traits,
)
from gpumosaic.policies.lp_base import (
    VariableLayout,
    aggregate_identical_jobs,
    allocation_from_solution,
    build_base_constraints,
    empty_allocation,
    job_rate_matrix,
    pair_coefficients,
    proportional_throughputs,
    usable_pairs,
)
from gpumosaic.policies.lp_solve import LinearProgram, PolicySolveError, solve
from gpumosaic.policies.max_min_fairness import max_min_program

ENTITY_POLICIES = ("fairness", "fifo")


@dataclass(frozen=True, slots=True)
class WaterFilling:
    name: str = "max_min_fairness_water_filling_perf"
    heterogeneity_aware: bool = True
    use_pairs: bool = False
    entity_policy: str = "fairness"
    entity_policies: tuple[tuple[str, str], ...] = ()  # per-entity overrides
    backend: str = "clarabel"
    slack: float = 1.0001
    epsilon: float = 1e-5
    aggregate: bool = True  # merge identical jobs (``JobClasses``) when not packing

    @property
    def traits(self) -> PolicyTraits:
        return lp_traits(self.heterogeneity_aware, self.use_pairs)

    def allocate(self, inp: PolicyInput) -> Allocation:
        if inp.num_jobs == 0:
            return empty_allocation(inp)
        pairs = usable_pairs(inp, self.use_pairs)
        if pairs is None and self.aggregate:
            classes = aggregate_identical_jobs(inp, self._class_key(inp))
            if len(classes.counts) < inp.num_jobs:
                reduced = self._water_fill(classes.reduced, None, classes.counts)
                return classes.expand(inp, reduced)
        return self._water_fill(inp, pairs, np.ones(inp.num_jobs, dtype=np.int64))

    def _class_key(self, inp: PolicyInput) -> FloatArray:
        """What water filling sees of a job: its rates, scale, weight, entity (and, under
        a FIFO entity, its place in line, so that those jobs never merge)."""
        if self.heterogeneity_aware:
            rates = np.asarray(inp.throughputs, dtype=np.float64)
            prop = proportional_throughputs(inp, rates)
            rates = rates / np.where(prop > 0, prop, 1.0)[:, None]
        else:
            rates = (inp.throughputs > 0).astype(np.float64)
        entity_ids = {e: i for i, e in enumerate(dict.fromkeys(inp.entities))}
        overrides = dict(self.entity_policies)
        entity = np.array([entity_ids.get(e, -1) for e in inp.entities] or [-1] * inp.num_jobs)
        in_line = np.array(
            [
                j
                if inp.entities and overrides.get(inp.entities[j], self.entity_policy) == "fifo"
                else -1
                for j in range(inp.num_jobs)
            ]
        )
        return np.column_stack(
            [rates, inp.scale_factors, inp.priority_weights, entity, in_line]
        ).astype(np.float64)

    def _water_fill(
        self, inp: PolicyInput, pairs: PackedPairs | None, counts: npt.NDArray[np.int64]
    ) -> Allocation:
        n = inp.num_jobs
        base = build_base_constraints(inp, pairs, n_extra=1)
        norm_rates = self._normalized_rates(inp, base.layout, pairs)
        scale = np.asarray(inp.scale_factors, dtype=np.float64)
        big_m = 2.0 * float(abs(norm_rates).max()) + 1.0
        frozen = np.zeros(n, dtype=bool)
        final = np.zeros(n)
        level = np.zeros(n)
        values: FloatArray | None = None
        first_level = float("nan")
        notes: list[str] = []
        fallbacks = rounds = 0
        while not frozen.all():
            weights = self._weights(inp, frozen, counts)
            active = ~frozen & (weights > 0)
            if not active.any():
                break
            rounds += 1
            rows = np.flatnonzero(active)
            mult = scale[rows] / weights[rows]
            floors = np.where(frozen, final, level)
            program = max_min_program(
                base,
                sp.csr_array(norm_rates[rows].multiply(mult[:, None])),
                mult * level[rows],
                norm_rates,
                floors,
            )
            try:
                solution = solve(program, self.backend)
            except PolicySolveError as err:
                if values is None:
                    raise PolicySolveError(f"{self.name}: first water-filling LP: {err}") from None
                fallbacks += 1
                notes.append(f"round {rounds}: LP failed ({err}); kept the previous allocation")
                break
            values = solution.values
            c = max(float(values[-1]), 0.0)
            if rounds == 1:
                first_level = c
            level[rows] += c / mult
            try:
                improvable = self._bottleneck_milp(
                    inp, pairs, norm_rates, active, level, frozen, final, big_m
                )
            except PolicySolveError as err:
                fallbacks += 1
                notes.append(
                    f"round {rounds}: bottleneck MILP failed ({err}); froze all active jobs"
                )
                improvable = np.zeros(n, dtype=bool)
            newly = active & ~improvable
            if not newly.any():
                break
            final[newly] = level[newly]
            frozen |= newly
        assert values is not None
        notes.append(f"water filling: {rounds} round(s), fallbacks={fallbacks}")
        failed = Fallbacks.of(Fallback.POLICY_SOLVE_FAILED, fallbacks)
        return allocation_from_solution(
            inp, base.layout, values, pairs, first_level, tuple(notes), failed
        )

    def _normalized_rates(
        self, inp: PolicyInput, layout: VariableLayout, pairs: PackedPairs | None
    ) -> sp.csr_array:
        if self.heterogeneity_aware:
            throughputs = np.asarray(inp.throughputs, dtype=np.float64)
            prop = proportional_throughputs(inp, throughputs)
        else:
            throughputs = (inp.throughputs > 0).astype(np.float64)
            prop = np.ones(inp.num_jobs)
        inv_prop = np.where(prop > 0, 1.0 / np.where(prop > 0, prop, 1.0), 0.0)
        pair = pair_coefficients(pairs, inv_prop)
        if pair is not None and not self.heterogeneity_aware:
            pair = (pair > 0).astype(np.float64)
        return job_rate_matrix(layout, throughputs * inv_prop[:, None], pair, pairs)

    def _weights(
        self, inp: PolicyInput, frozen: np.ndarray, counts: npt.NDArray[np.int64]
    ) -> FloatArray:
        """This round's weight per job (0 for frozen jobs and FIFO jobs not yet at the head).

        ``counts[j]``: how many identical jobs row j stands for (an entity's weight is
        split over jobs, not rows).
        """
        priority = np.asarray(inp.priority_weights, dtype=np.float64)
        if not inp.entities:
            return np.where(frozen, 0.0, priority)
        entity_weight = dict(inp.entity_weights)
        overrides = dict(self.entity_policies)
        weights = np.zeros(inp.num_jobs)
        for entity in dict.fromkeys(inp.entities):
            members = [j for j, e in enumerate(inp.entities) if e == entity and not frozen[j]]
            if not members:
                continue
            policy = overrides.get(entity, self.entity_policy)
            total = entity_weight.get(entity, 1.0)
            if policy == "fifo":
                head = min(members, key=lambda j: (float(inp.arrival_s[j]), inp.job_ids[j]))
                weights[head] = total
            elif policy == "fairness":
                total_priority = float((priority[members] * counts[members]).sum())
                share = priority[members] / max(total_priority, 1e-12)
                weights[members] = total * share
            else:
                raise ValueError(f"entity policy must be one of {ENTITY_POLICIES}, got {policy!r}")
        return weights

    def _bottleneck_milp(
        self,
        inp: PolicyInput,
        pairs: PackedPairs | None,
        norm_rates: sp.csr_array,
        active: np.ndarray,
        level: FloatArray,
        frozen: np.ndarray,
        final: FloatArray,
        big_m: float,
    ) -> np.ndarray:
        """Boolean mask of active jobs that can still be raised above level * slack."""
        n = inp.num_jobs
        base = build_base_constraints(inp, pairs, n_extra=n)
        n_x = base.upper.shape[0]
        rates = sp.hstack([norm_rates[:, :n_x], sp.csr_array((n, n))], format="csr")
        z = sp.hstack([sp.csr_array((n, n_x)), sp.identity(n, format="csr")], format="csr")
        target = level * self.slack
        floors = np.where(frozen, final, level)
        # Indicator rows only for active jobs: Gavel also writes them for frozen and
        # zero-weight jobs (z = 0), which makes the MILP infeasible whenever such a job's
        # level is below eps / (slack - 1), e.g. the queued jobs of a FIFO entity.
        act = np.flatnonzero(active)
        a_ub = sp.vstack(
            [
                base.a_ub,
                rates[act] - big_m * z[act],  # z_j = 0  =>  n_j <= target_j - eps
                big_m * z[act] - rates[act],  # z_j = 1  =>  n_j >= target_j
                -rates,  # n_j >= floor_j
            ],
            format="csr",
        )
        b_ub = np.concatenate([base.b_ub, target[act] - self.epsilon, big_m - target[act], -floors])
        c = np.concatenate([np.zeros(n_x), -np.ones(n)])
        program = LinearProgram(
            c=c,
            a_ub=sp.csr_array(a_ub),
            b_ub=b_ub,
            lower=np.zeros(n_x + n),
            upper=np.concatenate([base.upper, active.astype(np.float64)]),
            integer=np.concatenate([np.zeros(n_x, dtype=bool), np.ones(n, dtype=bool)]),
        )
        solution = solve(program, "highs")
        return np.asarray(solution.values[n_x:] > 0.5) & active
