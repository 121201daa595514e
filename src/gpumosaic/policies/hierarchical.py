"""Hierarchical max-min fairness by water filling (Gavel's ``max_min_fairness_water_filling*``).

What it optimises, in Gavel's terms: the leximin (lexicographic max-min) vector of the
weighted normalized throughputs sf_j / w_j * n_j(X), where n_j(X) = rate_j(X) / prop_j,
rate_j(X) = sum_t thr[j, t] X[j, t] (plus pair terms with ``_packed``) and prop_j is the
job's throughput under Gavel's ``ProportionalPolicy`` share capacity_t / sum(capacity)
(``proportional_throughputs``). The agnostic variant sets every usable throughput to 1
(prop_j = 1). Each round raises, as far as possible and in proportion to the job
weights, every job that is not yet frozen, keeping every job at or above what it has:

1. weights: with entities, an entity's weight is split over its unfrozen jobs, either in
   proportion to their priority weights (``"fairness"``) or all to its earliest job
   (``"fifo"``); without entities, jobs keep their priority weights;
2. LP: maximize c s.t. (sf_j / w_j) (n_j(X) - level_j) >= c for the active jobs (w_j > 0,
   not frozen), n_j(X) >= level_j (or the frozen value) for every job; then
   level_j += c w_j / sf_j;
3. bottleneck test: an active job is improvable if it can reach target_j = level_j *
   slack (+ ``min_gain``) with every job at or above its floor; the others are frozen at
   level_j. One LP finds most improvable jobs at once (maximize sum(u), 0 <= u <= 1,
   n_j >= floor_j + (target_j - floor_j) u_j: every job with u_j = 1 reaches its
   target); each remaining active job gets one LP (maximize n_j).

It stops when every job is frozen. Where this departs from Gavel's code, and why:

- Gavel's bottleneck test is one MILP (GLPK) that maximizes the number of jobs reaching
  their targets *at once* and freezes everybody else, which can freeze a job that could
  still rise (only not together with all the others). Here a job is frozen only if it
  cannot rise at all, so the result is the leximin vector up to the slack, never below
  Gavel's. (Gavel's MILP also crashes inside GLPK on some instances.)
- Gavel writes big-M indicators, among them "z_j = 0 => n_j <= level_j * slack - 1e-5".
  With the floor n_j >= level_j that row is infeasible for any job below level
  1e-5 / (slack - 1) = 0.1, which freezes every job. The LPs above have no such row.
- The level a round reaches is what its allocation achieves (clipped and scaled onto the
  base constraints), not the LP's c: an interior-point LP reports a level ~1e-10 above
  what any allocation reaches, and a test that must keep every job there is infeasible
  or nearly so (HiGHS then reported 1 improvable job class of 25 where the truth is 24,
  or none, freezing all). Floors are also relaxed by ``floor_tolerance`` (1e-9,
  relative), and the rows are divided by target_j so the gap to prove is ~1e-4.

A job with no throughput on any type is frozen at 0 from the start (noted): it would
otherwise pin every round's level at 0. Failures are counted in ``Allocation.fallbacks``
(``policy_solve_failed``) and described in ``Allocation.notes`` (the last note sums them
as ``fallbacks=N``), never silent: a failed bottleneck test freezes every active job (so the
loop ends), a failed LP after the first round keeps the previous X, and a round that
freezes nobody (impossible in exact arithmetic) stops the filling. A failed first LP
raises PolicySolveError.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

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
    repair_feasibility,
    usable_pairs,
)
from gpumosaic.policies.lp_solve import LinearProgram, PolicySolveError, solve
from gpumosaic.policies.max_min_fairness import max_min_program

if TYPE_CHECKING:
    import scipy.sparse as sp

ENTITY_POLICIES = ("fairness", "fifo")


@dataclass(frozen=True, slots=True)
class WaterFilling:
    name: str = "max_min_fairness_water_filling_perf"
    heterogeneity_aware: bool = True
    use_pairs: bool = False
    entity_policy: str = "fairness"
    entity_policies: tuple[tuple[str, str], ...] = ()  # per-entity overrides
    backend: str = "clarabel"
    slack: float = 1.0001  # Gavel's: a job is improvable if it can reach level * slack
    # Relative relaxation of the floors n_j >= level_j in the LPs (see the module
    # docstring). Small: what the others may give up adds up, and 1e-6 let bottleneck
    # jobs of 12-job instances look improvable (the fill then stopped early).
    floor_tolerance: float = 1e-9
    # A job at level 0 is improvable only if it can gain this much (normalized
    # throughput); otherwise every job that cannot run at all would count as improvable.
    min_gain: float = 1e-6
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
        import scipy.sparse as sp

        n = inp.num_jobs
        base = build_base_constraints(inp, pairs, n_extra=1)
        norm_rates = self._normalized_rates(inp, base.layout, pairs)
        scale = np.asarray(inp.scale_factors, dtype=np.float64)
        frozen = np.asarray(norm_rates.max(axis=1).toarray().reshape(-1) <= 0, dtype=bool)
        final = np.zeros(n)
        level = np.zeros(n)
        values: FloatArray | None = None
        first_level = float("nan")
        notes: list[str] = []
        if frozen.any():
            notes.append(f"{int(frozen.sum())} job class(es) have no throughput on any type")
        fallbacks = rounds = 0
        while not frozen.all():
            weights = self._weights(inp, frozen, counts)
            active = ~frozen & (weights > 0)
            if not active.any():
                break
            rounds += 1
            rows = np.flatnonzero(active)
            mult = scale[rows] / weights[rows]
            floors = self._relaxed(np.where(frozen, final, level))
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
            values = self._feasible(inp, base.layout, solution.values, pairs)
            # The level this round reaches is what the (repaired) allocation achieves, not
            # the LP's z, which can overshoot it (interior-point tolerance).
            achieved = norm_rates @ values
            c = min(
                float(solution.values[-1]), float((mult * (achieved[rows] - level[rows])).min())
            )
            c = max(c, 0.0)
            if rounds == 1:
                first_level = c
            level[rows] += c / mult
            try:
                improvable = self._improvable(
                    inp, pairs, norm_rates, active, level, frozen, final, achieved
                )
            except PolicySolveError as err:
                fallbacks += 1
                notes.append(
                    f"round {rounds}: bottleneck test failed ({err}); froze all active jobs"
                )
                improvable = np.zeros(n, dtype=bool)
            newly = active & ~improvable
            if not newly.any():
                # An LP round always leaves a bottleneck; none found is a numerical failure.
                fallbacks += 1
                notes.append(f"round {rounds}: no bottleneck job found; stopped filling")
                break
            final[newly] = level[newly]
            frozen |= newly
        if values is None:  # every job frozen before the first round: nobody can run
            return empty_allocation(inp, tuple(notes))
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

    def _improvable(
        self,
        inp: PolicyInput,
        pairs: PackedPairs | None,
        norm_rates: sp.csr_array,
        active: np.ndarray,
        level: FloatArray,
        frozen: np.ndarray,
        final: FloatArray,
        achieved: FloatArray,
    ) -> np.ndarray:
        """Boolean mask of the active jobs that can still reach target_j = level_j * slack
        (+ ``min_gain``) with every job at or above its floor (see the module docstring).

        Floors never exceed what the current allocation ``achieved``, so every program
        here has a feasible point that satisfies the base constraints exactly.
        """
        import scipy.sparse as sp

        n = inp.num_jobs
        base = build_base_constraints(inp, pairs, n_extra=n)
        n_x = base.upper.shape[0]
        target = level * self.slack + self.min_gain
        floors = self._relaxed(np.minimum(np.where(frozen, final, level), achieved))
        # Rows n_j >= floor_j + (target_j - floor_j) u_j, divided by target_j so that the
        # gap is ~1e-4 whatever the job's level (by at most 1e3: a job at level 0 has a
        # target of min_gain, and a row scaled by 1e6 stalls the interior point).
        unit = 1.0 / np.maximum(target, 1e-3)
        lift = sp.diags_array(np.where(active, (target - floors) * unit, 0.0)).tocsr()
        level_rows = sp.diags_array(-unit).tocsr() @ norm_rates[:, :n_x]
        a_ub = sp.csr_array(sp.vstack([base.a_ub, sp.hstack([level_rows, lift], format="csr")]))
        b_ub = np.concatenate([base.b_ub, -floors * unit])
        lower = np.zeros(n_x + n)
        # 1) One LP: maximize sum(u), 0 <= u_j <= 1. Every job whose u_j reaches 1 can reach
        #    its target (together with the others), which is usually all but the bottlenecks.
        together = LinearProgram(
            c=np.concatenate([np.zeros(n_x), -np.ones(n)]),
            a_ub=a_ub,
            b_ub=b_ub,
            lower=lower,
            upper=np.concatenate([base.upper, active.astype(np.float64)]),
        )
        u = solve(together, self.backend).values[n_x:]
        improvable = active & (u >= 1.0 - 1e-4)
        # 2) The others, one LP each: maximize n_j with everybody at or above the floor.
        alone_upper = np.concatenate([base.upper, np.zeros(n)])
        for j in np.flatnonzero(active & ~improvable).tolist():
            c = np.zeros(n_x + n)
            c[:n_x] = level_rows[[j]].toarray().reshape(-1)  # -n_j / target_j
            alone = LinearProgram(c=c, a_ub=a_ub, b_ub=b_ub, lower=lower, upper=alone_upper)
            best = -solve(alone, self.backend).objective / unit[j]  # max n_j
            improvable[j] = best >= target[j] - 1e-3 * (target[j] - floors[j])
        return improvable

    @staticmethod
    def _feasible(
        inp: PolicyInput, layout: VariableLayout, values: FloatArray, pairs: PackedPairs | None
    ) -> FloatArray:
        """``values`` with X and Y clipped and scaled onto the base constraints exactly."""
        x, y, extra = layout.split(values)
        x, y = repair_feasibility(inp, np.clip(x, 0.0, 1.0), np.clip(y, 0.0, 1.0), pairs)
        return np.concatenate([x.reshape(-1), y.reshape(-1), extra])

    def _relaxed(self, floors: FloatArray) -> FloatArray:
        """Floors lowered by the relative ``floor_tolerance`` (see the module docstring)."""
        return np.asarray(floors - self.floor_tolerance * np.abs(floors), dtype=np.float64)
