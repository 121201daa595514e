"""Gandiva's policy as Gavel models it (``gandiva``): equal time shares plus random packing.

While the jobs' GPU demand fits the cluster, every job gets its isolated share
(``isolated_shares``). Once it does not, jobs are grouped into pairs at random (seeded),
only pairs of equal scale factor that are candidates in ``PolicyInput.packed``; every
group (pair or single) then gets an isolated share. A pair is kept across calls (the
policy object remembers it) until a member leaves or its packed throughput, normalized
by the isolated ones and summed over GPU types as in Gavel, drops below 1 (Gandiva's
"introspective" undo of bad packings).
"""

from __future__ import annotations

import numpy as np

from gpumosaic.policies.base import (
    Allocation,
    FloatArray,
    PairCandidates,
    PolicyInput,
    PolicyTraits,
    TypeOrder,
)
from gpumosaic.policies.isolated import isolated_shares


class Gandiva:
    def __init__(
        self, seed: int = 0, name: str = "gandiva", rng: np.random.Generator | None = None
    ) -> None:
        """``rng``: the run's Generator (``seed`` only seeds one when none is given)."""
        self._rng = rng if rng is not None else np.random.default_rng(seed)
        self._partner: dict[int, int | None] = {}  # job id -> partner job id (None: alone)
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    @property
    def traits(self) -> PolicyTraits:
        # Pairs among every job (random grouping, no LP); types in a fixed order.
        return PolicyTraits(PairCandidates.ALL, TypeOrder.FIXED, random=True)

    def allocate(self, inp: PolicyInput) -> Allocation:
        n, n_types = inp.num_jobs, len(inp.gpu_types)
        capacity = np.asarray(inp.capacity, dtype=np.float64)
        matrix = np.zeros((n, n_types))
        if n == 0:
            return Allocation(inp.job_ids, inp.gpu_types, matrix, objective=0.0)
        if inp.demand.sum() <= capacity.sum() or inp.packed is None:
            self._partner = {}
            matrix = np.where(inp.throughputs > 0, isolated_shares(capacity, inp.demand), 0.0)
            return Allocation(inp.job_ids, inp.gpu_types, matrix, objective=float(matrix.sum()))
        packed = inp.packed
        row_of = {job_id: j for j, job_id in enumerate(inp.job_ids)}
        pair_index = {(int(a), int(b)): k for k, (a, b) in enumerate(packed.pairs)}
        self._forget_broken_pairs(inp, row_of, pair_index)
        unassigned = [j for j, job_id in enumerate(inp.job_ids) if job_id not in self._partner]
        for _ in range(len(unassigned)):
            if len(unassigned) < 2:
                break
            a, b = (int(v) for v in self._rng.choice(unassigned, size=2, replace=False))
            if (min(a, b), max(a, b)) not in pair_index:
                continue
            unassigned.remove(a)
            unassigned.remove(b)
            self._partner[inp.job_ids[a]] = inp.job_ids[b]
            self._partner[inp.job_ids[b]] = inp.job_ids[a]
        for j in unassigned:
            self._partner[inp.job_ids[j]] = None
        singles = sorted(row_of[i] for i, p in self._partner.items() if p is None)
        pair_ks = sorted(
            {
                pair_index[pair_key(row_of[i], row_of[p])]
                for i, p in self._partner.items()
                if p is not None
            }
        )
        group_demand = np.concatenate(
            [
                inp.demand[singles],
                np.maximum(
                    inp.demand[packed.pairs[pair_ks, 0]], inp.demand[packed.pairs[pair_ks, 1]]
                ),
            ]
        )
        shares = isolated_shares(capacity, group_demand)
        matrix[singles] = np.where(inp.throughputs[singles] > 0, shares[: len(singles)], 0.0)
        pair_matrix = np.zeros((len(packed.pairs), n_types))
        usable = (packed.throughputs[pair_ks, :, 0] > 0) & (packed.throughputs[pair_ks, :, 1] > 0)
        pair_matrix[pair_ks] = np.where(usable, shares[len(singles) :], 0.0)
        return Allocation(
            inp.job_ids,
            inp.gpu_types,
            matrix,
            pair_matrix=pair_matrix,
            packed=packed,
            objective=float(matrix.sum() + pair_matrix.sum()),
        )

    def _forget_broken_pairs(
        self, inp: PolicyInput, row_of: dict[int, int], pair_index: dict[tuple[int, int], int]
    ) -> None:
        assert inp.packed is not None
        keep: dict[int, int | None] = {}
        for job_id, partner in self._partner.items():
            if job_id not in row_of or partner is None or partner not in row_of:
                continue  # departed jobs and singles are regrouped
            k = pair_index.get(pair_key(row_of[job_id], row_of[partner]))
            if k is None or _normalized_rate_of(inp, k) < 1.0:
                continue
            keep[job_id] = partner
        self._partner = keep


def pair_key(a: int, b: int) -> tuple[int, int]:
    """A pair of job rows, smaller row first."""
    return (min(a, b), max(a, b))


def summed_normalized_rate(inp: PolicyInput, a: int, b: int, rates: FloatArray) -> float:
    """Gavel's keep-the-pair test: packed / isolated rate of rows a and b summed over both
    jobs and every GPU type; 0 if any packed rate is 0. ``rates[t] = (rate_a, rate_b)``."""
    if (rates <= 0).any():
        return 0.0
    iso = np.stack([inp.throughputs[a], inp.throughputs[b]], axis=1)
    return float((rates / np.where(iso > 0, iso, np.inf)).sum())


def _normalized_rate_of(inp: PolicyInput, k: int) -> float:
    assert inp.packed is not None
    a, b = (int(v) for v in inp.packed.pairs[k])
    return summed_normalized_rate(inp, a, b, inp.packed.throughputs[k])
