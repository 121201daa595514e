"""First in, first out (Gavel's ``fifo``, ``fifo_perf``, ``fifo_packed``).

Jobs are taken in arrival order (then job id) and each gets a whole row of X (1.0) on one
GPU type with enough free capacity (demand-weighted, so two 500-milli jobs fit on one
GPU). The first job that fits nowhere stops the queue: no job jumps ahead.

- ``fifo``: a job keeps its type from one call to the next while it runs (the policy
  object remembers it); a new job gets a type chosen at random (seeded) among those
  with room, as Gavel's does.
- ``fifo_perf``: re-assigned every call; a job gets the fastest type with room.
- ``fifo_packed``: like ``_perf``, then each queued job, in order, is packed with the
  running single job (same scale factor, a candidate pair in ``PolicyInput.packed``)
  whose pair has the best normalized packed throughput on that job's type, if above
  ``packing_threshold`` (1.5 in Gavel); the queue stops at the first job with none.
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

_EPS = 1e-9


def fifo_order(inp: PolicyInput) -> list[int]:
    """Row indices by arrival time, then job id."""
    return sorted(range(inp.num_jobs), key=lambda j: (float(inp.arrival_s[j]), inp.job_ids[j]))


class Fifo:
    """Stateful in ``fifo`` mode (sticky types), like Gavel's; one object per simulation."""

    def __init__(
        self,
        mode: str = "base",
        seed: int = 0,
        packing_threshold: float = 1.5,
        name: str = "",
        rng: np.random.Generator | None = None,
    ) -> None:
        """``rng``: the run's Generator (``seed`` only seeds one when none is given)."""
        if mode not in ("base", "perf", "packed"):
            raise ValueError(f"fifo mode must be base, perf or packed, got {mode!r}")
        self._mode = mode
        self._rng = rng if rng is not None else np.random.default_rng(seed)
        self._packing_threshold = packing_threshold
        self._sticky: dict[int, int] = {}  # job id -> type column (base mode)
        self._name = name or {"base": "fifo", "perf": "fifo_perf", "packed": "fifo_packed"}[mode]

    @property
    def name(self) -> str:
        return self._name

    @property
    def traits(self) -> PolicyTraits:
        base = self._mode == "base"
        return PolicyTraits(
            pairs=PairCandidates.BEST if self._mode == "packed" else PairCandidates.NONE,
            type_order=TypeOrder.SHUFFLED if base else TypeOrder.FIXED,
            skips_zero_priority=True,
            random=base,
        )

    def allocate(self, inp: PolicyInput) -> Allocation:
        n, n_types = inp.num_jobs, len(inp.gpu_types)
        free = np.asarray(inp.capacity, dtype=np.float64).copy()
        assigned: dict[int, int] = {}  # row -> type column
        row_of = {job_id: j for j, job_id in enumerate(inp.job_ids)}
        if self._mode == "base":
            for job_id, t in self._sticky.items():
                if job_id in row_of:
                    assigned[row_of[job_id]] = t
                    free[t] -= inp.demand[row_of[job_id]]
        queue = [j for j in fifo_order(inp) if j not in assigned]
        while queue:
            j = queue[0]
            fits = np.flatnonzero((free >= inp.demand[j] - _EPS) & (inp.throughputs[j] > 0))
            if len(fits) == 0:
                break
            if self._mode == "base":
                t = int(fits[self._rng.integers(len(fits))])
            else:
                t = int(fits[np.argmax(inp.throughputs[j, fits])])
            assigned[j] = t
            free[t] -= inp.demand[j]
            queue.pop(0)
        if self._mode == "base":
            self._sticky = {inp.job_ids[j]: t for j, t in assigned.items()}
        matrix = np.zeros((n, n_types))
        for j, t in assigned.items():
            matrix[j, t] = 1.0
        if self._mode != "packed" or inp.packed is None or not queue:
            return Allocation(inp.job_ids, inp.gpu_types, matrix, objective=float(len(assigned)))
        pair_matrix = self._pack(inp, queue, assigned, matrix)
        return Allocation(
            inp.job_ids,
            inp.gpu_types,
            matrix,
            pair_matrix=pair_matrix,
            packed=inp.packed,
            objective=float(len(assigned)),
        )

    def _pack(
        self, inp: PolicyInput, queue: list[int], assigned: dict[int, int], matrix: FloatArray
    ) -> FloatArray:
        """Move queued jobs into pairs with running singles; edits ``matrix`` in place."""
        assert inp.packed is not None
        pairs = inp.packed
        pair_index = {(int(a), int(b)): k for k, (a, b) in enumerate(pairs.pairs)}
        pair_matrix = np.zeros((len(pairs.pairs), len(inp.gpu_types)))
        singles = set(assigned)
        for j in queue:
            best, best_gain = -1, self._packing_threshold
            for s in sorted(singles):
                if inp.scale_factors[s] != inp.scale_factors[j]:
                    continue
                k = pair_index.get((min(s, j), max(s, j)))
                if k is None:
                    continue
                t = assigned[s]
                gain = _normalized_pair_rate(inp, k, t)
                if gain > best_gain:
                    best, best_gain = s, gain
            if best < 0:
                break
            k = pair_index[(min(best, j), max(best, j))]
            pair_matrix[k, assigned[best]] = 1.0
            matrix[best, :] = 0.0
            singles.discard(best)
        return pair_matrix


def _normalized_pair_rate(inp: PolicyInput, k: int, t: int) -> float:
    """Sum over both jobs of packed rate / isolated rate on type t (0 if unmeasured)."""
    assert inp.packed is not None
    total = 0.0
    for side in (0, 1):
        rate = float(inp.packed.throughputs[k, t, side])
        iso = float(inp.throughputs[inp.packed.pairs[k, side], t])
        if rate <= 0 or iso <= 0:
            return 0.0
        total += rate / iso
    return total
