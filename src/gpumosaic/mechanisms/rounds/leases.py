"""Leases of the round mechanism: who holds which GPUs this round, through the placement layer.

An entity (a job, or a packed pair) that runs again on the same GPU type keeps its GPUs:
its lease is extended and it pays no restart. Every other holder is released at the round
boundary and the newly chosen entities are placed by the placement strategy (largest
demand first, as Gavel assigns the largest scale factors first). A multi-GPU job that no
single node can hold may span nodes if the job may (``JobSpec.may_span_nodes``: Gavel's
jobs may, their servers have one GPU each) and the run allows it (``span_nodes``).

Work per round is numpy over the chosen entities, plus Python per run of same-shape
entities (one placement-kernel call each), never per single job: single jobs' leases are
rows of arrays (the type held, whether as a gang; where lives in the ``ClusterState``),
released with one ``release_many``; the typed spec of (row, type) is built once
(``shapes.RowShapes``). Packed pairs and the rare job that spans servers go one by one.

Shortcut (``symmetric_fast_path``, see ``symmetric``): whole GPUs on a type of identical
one-GPU nodes go to the lowest-index free nodes without scoring, one numpy step per type.
Those entities are placed before the others of the round: nothing else a round places can
land on their nodes (every other entity either is typed to another GPU type or asks for a
fraction of a GPU, and so comes after them in the largest-first order), and placing only
takes resources, so every decision is the one of the strict largest-first order.

One pass (``one_pass_ready``; ``kernel.start_singles``, or ``round_kernel.round_singles``
with the round's choice): while no pair holds a lease and every lease is a row of the
state, a round whose entities are all single jobs starts in one compiled call: extension
test, release of the other leases, largest-first order, the symmetric shortcut and the
per-row bookkeeping, with the same decisions as the general path below (a test compares
them); the entities left for the strategy then go through ``placing``. A round with a
pair or a gang to place or release takes the general path.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from gpumosaic.errors import BookkeepingError
from gpumosaic.mechanisms.rounds.placing import Lease, StrategyPlacing
from gpumosaic.mechanisms.rounds.runs import KernelRuns
from gpumosaic.mechanisms.rounds.shapes import EntityKey, RowShapes, holder_id
from gpumosaic.mechanisms.rounds.symmetric import SymmetricTypes, symmetric_kernel
from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement.base import PlacementStrategy
from gpumosaic.types import BoolArray, IntArray

__all__ = ["EntityKey", "Lease", "LeaseBook", "LeaseCounts", "holder_id"]

# ``kernel.start_singles``' arrays of a lease book (``LeaseBook.one_pass_arrays``).
OnePassArrays = tuple[np.ndarray, ...]
# A one-pass round's rest to place (``LeaseBook.one_pass_done``): rows a and b, types,
# specs, extended, got and the rest's positions, over the chosen entities.
RestArguments = tuple[
    IntArray, IntArray, IntArray, Sequence[JobSpec], BoolArray, BoolArray, IntArray
]


@dataclass(frozen=True, slots=True)
class LeaseCounts:
    extensions: int
    opportunities: int
    failures: int


class LeaseBook(StrategyPlacing):
    """Owns the ClusterState of the round mechanism and the current leases."""

    def __init__(
        self,
        state: ClusterState,
        strategy: PlacementStrategy,
        type_names: tuple[str, ...],
        rng: np.random.Generator,
        span_nodes: bool,
        symmetric_fast_path: bool = True,
    ) -> None:
        """``one_pass`` False: every round takes the general path (tests compare the two)."""
        self.state = state
        self.one_pass = True
        self.one_pass_rounds = 0  # rounds started by ``_start_singles``
        self.strategy = strategy
        self.rng = rng
        self.span_nodes = span_nodes
        self.n_types = len(type_names)
        self.shapes = RowShapes(type_names)
        self.symmetric = SymmetricTypes(state, len(type_names), symmetric_fast_path)
        self.pairs: dict[EntityKey, Lease] = {}
        # The spec placed for (pair, type), built once as pairs move between types.
        self._pair_typed: dict[tuple[EntityKey, int], JobSpec] = {}
        self._pair_keys_of_row: dict[int, list[tuple[EntityKey, int]]] = {}  # for ``forget``
        # Per shape and type (``_place_runs``' key): the strategy's compiled run, if any.
        self.kernel_runs = KernelRuns(state, strategy, rng)
        self.extensions = 0
        self.opportunities = 0
        self.failures = 0
        self.seconds = 0.0  # spent placing and releasing (reported by the benchmark)
        self.fast_placements = 0
        self.placements = 0  # entities placed anew (not extended)
        # Per job row: the type of its single-job lease (-1: none), and whether that lease
        # is a gang (GPUs on several nodes).
        self._held_type = np.full(0, -1, dtype=np.int64)
        self._held_gang = np.zeros(0, dtype=bool)
        # The rows holding a lease, ``_held_list[:_held_known[0]]`` (-1: not known since the
        # general path ran), and a scratch flag per row: ``kernel.start_singles``' own.
        self._held_list = np.zeros(0, dtype=np.int64)
        self._held_known = np.zeros(1, dtype=np.int64)
        self._keep = np.zeros(0, dtype=bool)
        self._one_pass_arrays: OnePassArrays = ()  # ``one_pass_arrays``' last answer

    def counts(self) -> LeaseCounts:
        return LeaseCounts(self.extensions, self.opportunities, self.failures)

    # ---- one round -------------------------------------------------------------------

    def start_round(
        self,
        rows_a: IntArray,
        rows_b: IntArray,
        types: IntArray,
        specs: Sequence[JobSpec],
        active: BoolArray,
        one_pass: bool = True,
    ) -> tuple[IntArray, BoolArray]:
        """Apply this round's choice: entity i has job rows ``rows_a[i]``, ``rows_b[i]``
        (-1 for a single job) and runs on type ``types[i]``, in priority order;
        ``specs[row]`` is each job's spec (a pair asks for ``shapes.pair_spec`` of its
        first member's). ``active`` flags job rows still running (only their leases count
        as extension opportunities, as in Gavel). ``one_pass`` False: the caller knows the
        one-pass round does not apply (``one_pass_ready`` and ``kernel.start_singles``).

        Returns the positions that got GPUs (ascending) and, for each, whether its lease
        was extended.
        """
        started = time.perf_counter()
        n_rows = len(active)
        if one_pass and self.one_pass_ready():
            arrays = self.one_pass_arrays(n_rows, specs)
            n = len(rows_a)
            extended = np.empty(n, dtype=bool)
            got = np.empty(n, dtype=bool)
            rest = np.empty(n, dtype=np.int64)
            out_placed = np.empty(n, dtype=np.int64)
            out_extended = np.empty(n, dtype=bool)
            counts = symmetric_kernel().start_singles(
                rows_a, rows_b, types, active, *arrays, extended, got, rest, out_placed,
                out_extended,
            )  # fmt: skip
            done = self.one_pass_done(
                counts, lambda: (rows_a, rows_b, types, specs, extended, got, rest)
            )
            if done is not None:
                self.seconds += time.perf_counter() - started
                if done is True:
                    m = counts[2] + counts[5]
                    return out_placed[:m], out_extended[:m]
                return done
        self._grow_rows(n_rows)
        self.shapes.learn(specs, len(specs))
        self._held_known[0] = -1  # held rows change below, one by one
        held = self._held_type[:n_rows]
        single = rows_b < 0
        held_rows = np.flatnonzero(held >= 0)
        self.opportunities += int(active[held_rows].sum())
        if self.pairs:
            self.opportunities += sum(
                1 for a, b in self.pairs if active[a] or (b >= 0 and active[b])
            )
        extended = np.zeros(len(rows_a), dtype=bool)
        extended[single] = held[rows_a[single]] == types[single]
        kept_pairs: set[EntityKey] = set()
        if not single.all():
            for i in np.flatnonzero(~single).tolist():
                key = (int(rows_a[i]), int(rows_b[i]))
                lease = self.pairs.get(key)
                if lease is not None and lease.type_index == int(types[i]):
                    extended[i] = True
                    kept_pairs.add(key)
        self.extensions += int(extended.sum())
        # Release every lease not extended: single jobs in one pass, pairs one by one.
        keep_row = np.zeros(n_rows, dtype=bool)
        keep_row[rows_a[extended & single]] = True
        self._release_rows(held_rows[~keep_row[held_rows]])
        for key in [k for k in self.pairs if k not in kept_pairs]:
            self._release_pair(self.pairs.pop(key))
        got = extended.copy()
        fresh = np.flatnonzero(~extended)
        if len(fresh):
            self._place_fresh(fresh, rows_a, rows_b, types, specs, got)
        placed = np.flatnonzero(got)
        self.seconds += time.perf_counter() - started
        return placed, extended[placed]

    # ---- the one-pass round (``kernel.start_singles``) -----------------------------------

    def one_pass_ready(self) -> bool:
        """No pair holds a lease and every lease is a row of the state: a round of single
        jobs can start in one compiled pass."""
        state = self.state
        return self.one_pass and not self.pairs and not state.assignments and not state.gangs

    def one_pass_arrays(self, n_rows: int, specs: Sequence[JobSpec]) -> OnePassArrays:
        """``kernel.start_singles``' arrays of the book and its state, after making room
        for ``n_rows`` job rows and reading their shapes."""
        self._grow_rows(n_rows)
        shapes, sym, state = self.shapes, self.symmetric, self.state
        shapes.learn(specs, len(specs))
        rows = state.rows
        rows.reserve(n_rows)
        cached = self._one_pass_arrays
        if (
            cached
            and cached[0] is self._held_type
            and cached[5] is shapes.num_gpu
            and cached[18] is rows.node
        ):
            return cached  # nothing grew: the same arrays
        self._one_pass_arrays = (
            self._held_type, self._held_gang, self._held_list, self._held_known, self._keep,
            shapes.num_gpu, shapes.gpu_milli,
            shapes.cpu_milli, shapes.memory_mib, sym.mask, sym.type_nodes, sym.type_start,
            state.gpu_free, state.gpu_tasks, state.cpu_free, state.memory_free,
            state.kind_count, state.node_version, rows.node, rows.slots, rows.count,
            rows.milli, rows.cpu, rows.memory,
        )  # fmt: skip
        return self._one_pass_arrays

    def one_pass_done(
        self, counts: tuple[int, ...], rest_of: Callable[[], RestArguments]
    ) -> tuple[IntArray, BoolArray] | Literal[True] | None:
        """Book what ``kernel.start_singles`` did (``counts``: its result) and place the
        rest through the strategy. Returns None when the general path must start the
        round (the kernel changed nothing), True when the kernel's own output is the
        answer, else the positions placed and whether each was extended. ``rest_of()``
        gives the round's (rows_a, rows_b, types, specs, extended, got, rest), called
        only when there is a rest."""
        code, opportunities, extensions, released, released_milli, placed, failed, n_rest = counts
        kernel = symmetric_kernel()
        if code == kernel.GENERAL:
            return None
        if code == kernel.TAKEN:
            raise BookkeepingError("an entity placed anew already holds GPUs")
        self.one_pass_rounds += 1
        self.opportunities += opportunities
        self.extensions += extensions
        state = self.state
        if released:
            state.rows_released(released, released_milli)
        if placed:
            state.rows_written(placed, placed * MILLI_PER_GPU)
        self.placements += placed
        self.fast_placements += placed
        self.failures += failed
        if not n_rest:
            return True
        rows_a, rows_b, types, specs, extended, got, rest = rest_of()
        fresh = rest[:n_rest]
        self._place_rest(fresh, rows_a[fresh], rows_b[fresh], types[fresh], specs, got)
        positions = np.flatnonzero(got)
        return positions, extended[positions]

    def _place_fresh(
        self,
        fresh: IntArray,
        rows_a: IntArray,
        rows_b: IntArray,
        types: IntArray,
        specs: Sequence[JobSpec],
        got: BoolArray,
    ) -> None:
        """Place the entities at positions ``fresh``, largest demand first (stable:
        priority order among equals); mark the ones placed in ``got``."""
        shapes = self.shapes
        pair = rows_b[fresh] >= 0
        order = np.argsort(-shapes.total_milli(rows_a[fresh], pair), kind="stable")
        fresh = fresh[order]
        ra, rb, ty, pair = rows_a[fresh], rows_b[fresh], types[fresh], pair[order]
        whole = pair | (shapes.gpu_milli[ra] == MILLI_PER_GPU)
        fast = self.symmetric.mask[ty] & whole
        if fast.any():
            self._place_symmetric(fresh[fast], ra[fast], rb[fast], ty[fast], got)
        if fast.all():
            return
        rest = np.flatnonzero(~fast)
        self._place_rest(fresh[rest], ra[rest], rb[rest], ty[rest], specs, got)

    def _place_symmetric(
        self, positions: IntArray, ra: IntArray, rb: IntArray, ty: IntArray, got: BoolArray
    ) -> None:
        """Whole GPUs on identical one-GPU nodes, in one compiled step (see ``symmetric``)."""
        shapes = self.shapes
        pair = rb >= 0
        k = shapes.num_gpu[ra]
        cpu = np.where(pair, 0, shapes.cpu_milli[ra] // k)
        memory = np.where(pair, 0, shapes.memory_mib[ra] // k)
        eligible = (k == 1) | (shapes.may_span[ra] & self.span_nodes)
        holders = np.where(pair, -(1 + ra * (1 << 31) + rb), ra)
        placed = self.symmetric.place(self.state, ty, holders.tolist(), k, cpu, memory, eligible)
        n = int(placed.sum())
        self.failures += len(ra) - n
        self.placements += n
        self.fast_placements += n
        if not n:
            return
        got[positions[placed]] = True
        single = placed & ~pair
        rows = ra[single]
        self._held_type[rows] = ty[single]
        self._held_gang[rows] = k[single] > 1
        if pair.any():
            for i in np.flatnonzero(placed & pair).tolist():
                key, h = (int(ra[i]), int(rb[i])), int(holders[i])
                gang = self.state.gangs.get(h)
                nodes = (
                    (self.state.assignments[h].node,)
                    if gang is None
                    else tuple(p.node for p in gang)
                )
                self.pairs[key] = Lease(key, int(ty[i]), h, nodes, gang is not None)

    # ---- where entities hold GPUs ----------------------------------------------------

    def parts_of(self, rows_a: IntArray, rows_b: IntArray) -> tuple[tuple[Assignment, ...], ...]:
        """Where each entity holds GPUs now (one part per node)."""
        parts = self.state.parts_of
        return tuple(
            parts(a if b < 0 else holder_id((a, b)))
            for a, b in zip(rows_a.tolist(), rows_b.tolist(), strict=True)
        )

    def holding(self, row: int) -> tuple[Assignment, ...] | None:
        """Where single job ``row`` holds GPUs under its own lease, None if it holds none."""
        if row >= len(self._held_type) or self._held_type[row] < 0:
            return None
        return self.state.parts_of(row)

    # ---- ending leases ---------------------------------------------------------------

    def forget(self, rows: list[int]) -> None:
        """Drop cached specs of finished jobs (work in the number finished)."""
        self.shapes.forget(rows)
        for row in rows:
            for key in self._pair_keys_of_row.pop(row, ()):
                self._pair_typed.pop(key, None)

    def release_on(self, nodes: set[int]) -> None:
        """End every lease holding GPUs on ``nodes`` (they went away: a live service's
        lost node); the other leases stay."""
        self._held_known[0] = -1
        held = np.flatnonzero(self._held_type >= 0).tolist()
        parts = self.state.parts_of
        rows = [r for r in held if any(p.node in nodes for p in parts(r))]
        self._release_rows(np.array(rows, dtype=np.int64))
        for key in [k for k, lease in self.pairs.items() if nodes.intersection(lease.nodes)]:
            self._release_pair(self.pairs.pop(key))

    def held_type(self, row: int) -> int:
        """The GPU type of single job ``row``'s lease, -1 if it holds none."""
        return int(self._held_type[row]) if row < len(self._held_type) else -1

    def release_row(self, row: int) -> None:
        """End single job ``row``'s lease (its GPUs are free in the state again)."""
        self._held_known[0] = -1
        self._release_rows(np.array([row], dtype=np.int64))

    def release_all(self) -> None:
        self._held_known[0] = -1
        self._release_rows(np.flatnonzero(self._held_type >= 0))
        for lease in self.pairs.values():
            self._release_pair(lease)
        self.pairs = {}

    def _release_rows(self, rows: IntArray) -> None:
        """End the single-job leases of ``rows`` (one vectorized release)."""
        if not len(rows):
            return
        gang = self._held_gang[rows]
        if gang.any():
            self.state.release_gangs(rows[gang].tolist())
            self.state.release_many(rows[~gang])
        else:
            self.state.release_many(rows)  # an array: no list of ints in between
        self._held_type[rows] = -1
        self._held_gang[rows] = False

    def _release_pair(self, lease: Lease) -> None:
        if lease.gang:
            self.state.release_gang(lease.holder)
        else:
            self.state.release(lease.holder)

    def _grow_rows(self, n_rows: int) -> None:
        if n_rows <= len(self._held_type):
            return
        size = max(n_rows, 2 * len(self._held_type))
        held = np.full(size, -1, dtype=np.int64)
        held[: len(self._held_type)] = self._held_type
        gang = np.zeros(size, dtype=bool)
        gang[: len(self._held_gang)] = self._held_gang
        self._held_type, self._held_gang = held, gang
        listed = np.zeros(size, dtype=np.int64)
        listed[: len(self._held_list)] = self._held_list
        self._held_list, self._keep = listed, np.zeros(size, dtype=bool)
