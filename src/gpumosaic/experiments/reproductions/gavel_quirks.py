"""Gavel's ``fifo`` and ``gandiva`` exactly as their published numbers were produced.

Neither class is registered as a policy: each re-implements a behaviour as shipped, only
to show that the round mechanism reproduces Gavel's number once fed the same allocations.

``fifo`` (``GavelShippedFifo``):

Reading Gavel's FIFO policy (``policies/fifo.py``, base mode) shows that the GPU type it
draws at random for a queued job is never used: the job is recorded on whatever type a
loop variable last held, which is the last type of the cluster in sorted order
(``v100`` for v100/p100/k80). Every queued job is therefore allocated to V100 (the
per-type free count goes negative and never stops the loop), P100s and K80s idle, and the
oversubscribed V100s are time-shared by the round mechanism. That is why Gavel reports
58.76 h avg JCT for ``fifo`` on minimize_makespan.trace against 10-20 h for every other
policy. gpumosaic's ``fifo`` policy does what the code meant (a random type with room);
``GavelShippedFifo`` re-implements the behaviour as shipped.

Other details kept from Gavel's FIFO: a type a job got stays its type while it runs; a
finished job's type is first offered to the head of the queue, checked against a free
count that has not yet subtracted the jobs listed after it (so it may oversubscribe),
and a head that does not fit is skipped for that call.

``gandiva`` (``GavelShippedGandiva``): Gavel's Gandiva policy pairs two random jobs
whenever their scale factors are equal, without asking whether the pair can run. Gavel's
table measures no multi-GPU pair (every such entry is [0, 0]), so a pair of two 2- or
4-GPU jobs gets a time share it can never use: the mechanism skips zero-throughput
entities, the pair's jobs have no allocation of their own and only run on GPUs nobody
with an allocation wanted, until the next solve drops the pair (its normalized packed
throughput is 0 < 1) and draws new partners at random. Multi-GPU jobs are thus served
less, single-GPU jobs more. gpumosaic's ``gandiva`` pairs only jobs that can pack
(``policies/gandiva.py``; multi-GPU pair rates are estimated from the single-GPU ones).
Other details kept: pairs are remembered while the jobs fit the cluster, partners are
drawn with ``random.Random(seed).sample`` in job-id order, a group's share is
``capacity / groups / scale factor`` per type with its row scaled to sum <= 1.
"""

from __future__ import annotations

import random
from collections import defaultdict

import numpy as np

from gpumosaic.policies.base import (
    Allocation,
    FloatArray,
    PackedPairs,
    PairCandidates,
    PolicyInput,
    PolicyTraits,
    TypeOrder,
)
from gpumosaic.policies.gandiva import pair_key, summed_normalized_rate


class GavelShippedFifo:
    def __init__(self, seed: int = 0) -> None:
        self._rng = random.Random(seed)
        self._type_of: dict[int, str] = {}  # job id -> type name

    @property
    def name(self) -> str:
        return "fifo_as_shipped"

    @property
    def traits(self) -> PolicyTraits:
        # What the mechanism does for Gavel's fifo: shuffled types, zero priorities skipped.
        return PolicyTraits(skips_zero_priority=True)

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


class GavelShippedGandiva:
    def __init__(self, seed: int = 0) -> None:
        self._rng = random.Random(seed)
        self._partner: dict[int, int] = {}  # job id -> partner job id (pairs only)

    @property
    def name(self) -> str:
        return "gandiva_as_shipped"

    @property
    def traits(self) -> PolicyTraits:
        # What the mechanism does for Gavel's gandiva: every pair offered, fixed type order.
        return PolicyTraits(PairCandidates.ALL, TypeOrder.FIXED)

    def allocate(self, inp: PolicyInput) -> Allocation:
        n_types = len(inp.gpu_types)
        row_of = {job_id: j for j, job_id in enumerate(inp.job_ids)}
        scale = [int(s) for s in inp.scale_factors]
        rates = self._pair_rates(inp, row_of, scale)
        self._partner = {
            job_id: partner
            for job_id, partner in self._partner.items()
            if job_id in row_of and partner in row_of and _kept(inp, rates, row_of, job_id, partner)
        }
        capacity = np.asarray(inp.capacity, dtype=np.float64)
        singles: list[int] = list(range(inp.num_jobs))
        pairs: list[tuple[int, int]] = []
        if sum(scale) > capacity.sum():
            unassigned = [job_id for job_id in inp.job_ids if job_id not in self._partner]
            for _ in range(len(unassigned)):
                if len(unassigned) < 2:
                    break
                a, b = self._rng.sample(unassigned, 2)
                if scale[row_of[a]] != scale[row_of[b]]:
                    continue
                unassigned.remove(a)
                unassigned.remove(b)
                self._partner[a], self._partner[b] = b, a
            pairs = sorted({pair_key(row_of[a], row_of[b]) for a, b in self._partner.items()})
            paired = {r for pair in pairs for r in pair}
            singles = [r for r in range(inp.num_jobs) if r not in paired]
        group_scale = np.array([scale[r] for r in singles] + [scale[a] for a, _ in pairs], float)
        m = len(group_scale)
        shares = np.zeros((m, n_types))
        if m:
            shares = capacity[None, :] / m / group_scale[:, None]
            shares /= np.maximum(shares.sum(axis=1), 1.0)[:, None]
        matrix = np.zeros((inp.num_jobs, n_types))
        matrix[singles] = shares[: len(singles)]
        if not pairs:
            return Allocation(inp.job_ids, inp.gpu_types, matrix, objective=float(matrix.sum()))
        packed = PackedPairs(
            np.array(pairs, dtype=np.int64).reshape(-1, 2),
            np.array([rates[p] for p in pairs], dtype=np.float64).reshape(-1, n_types, 2),
        )
        pair_matrix = shares[len(singles) :]
        return Allocation(
            inp.job_ids,
            inp.gpu_types,
            matrix,
            pair_matrix=pair_matrix,
            packed=packed,
            objective=float(matrix.sum() + pair_matrix.sum()),
        )

    @staticmethod
    def _pair_rates(
        inp: PolicyInput, row_of: dict[int, int], scale: list[int]
    ) -> defaultdict[tuple[int, int], FloatArray]:
        """Measured pair rates by row pair; zero for multi-GPU pairs, as in Gavel's table."""
        n_types = len(inp.gpu_types)
        rates: defaultdict[tuple[int, int], FloatArray] = defaultdict(
            lambda: np.zeros((n_types, 2))
        )
        if inp.packed is not None:
            for (a, b), rate in zip(inp.packed.pairs.tolist(), inp.packed.throughputs, strict=True):
                if scale[a] == 1 and scale[b] == 1:
                    rates[pair_key(a, b)] = rate
        return rates


def _kept(
    inp: PolicyInput,
    rates: defaultdict[tuple[int, int], FloatArray],
    row_of: dict[int, int],
    job_a: int,
    job_b: int,
) -> bool:
    """Gavel keeps a pair while its summed normalized packed rate is at least 1."""
    a, b = pair_key(row_of[job_a], row_of[job_b])
    return summed_normalized_rate(inp, a, b, rates[(a, b)]) >= 1.0
