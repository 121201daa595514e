"""Leases of the round mechanism: who holds which GPUs this round, through the placement layer.

An entity (a job, or a packed pair) that runs again on the same GPU type keeps its GPUs:
its lease is extended and it pays no restart. Every other holder is released at the round
boundary and the newly chosen entities are placed by the placement strategy (largest
demand first, as Gavel assigns the largest scale factors first). A multi-GPU job that no
single node can hold may span nodes if the job may (``JobSpec.may_span_nodes``: Gavel's
jobs may, their servers have one GPU each) and the run allows it (``span_nodes``).

Shortcut (``symmetric_fast_path``): on a GPU type whose nodes all hold exactly one GPU
and have the same CPU and memory, a job asking for whole GPUs can only go to fully free
nodes, and those are indistinguishable: whichever the strategy picks, the cluster ends
in the same multiset of node states, so no simulated quantity (progress, JCT,
utilization, fragmentation, power, later placements up to a relabelling of identical
nodes) can differ. There the mechanism takes the lowest-index free nodes without
scoring them; this is most of Gavel's experiments, where jobs change GPU type often.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from gpumosaic.mechanisms.gang import gang_parts
from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement.base import PlacementStrategy
from gpumosaic.placement.batch import place_many
from gpumosaic.types import BoolArray, IntArray

EntityKey = tuple[int, int]  # (row of job a, row of job b or -1)


class Lease(NamedTuple):
    """Who holds which GPUs for a round. A named tuple rather than a frozen dataclass:
    one is made per placement (~10 a round in Gavel's runs, thousands at openb scale),
    and a frozen dataclass costs several times more to build."""

    key: EntityKey
    type_index: int
    holder: int  # the id the ClusterState knows the holder by
    nodes: tuple[int, ...]
    gang: bool


@dataclass(frozen=True, slots=True)
class LeaseCounts:
    extensions: int
    opportunities: int
    failures: int


class LeaseBook:
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
        self.state = state
        self.strategy = strategy
        self.allowed = tuple(frozenset({name.upper()}) for name in type_names)
        self.rng = rng
        self.span_nodes = span_nodes
        self.leases: dict[EntityKey, Lease] = {}
        # The spec placed for (entity, type): built once, as entities move between types.
        self._typed: dict[tuple[EntityKey, int], JobSpec] = {}
        self._keys_of_row: dict[int, list[tuple[EntityKey, int]]] = {}  # for ``forget``
        self.extensions = 0
        self.opportunities = 0
        self.failures = 0
        self.seconds = 0.0  # spent placing and releasing (reported by the benchmark)
        self.fast_placements = 0
        self.placements = 0  # entities placed anew (not extended)
        # Within one round's placements: per symmetric type, its free nodes and how many of
        # them are taken (see _place_symmetric); cleared whenever the strategy places.
        self._idle: dict[int, list[int]] = {}
        self._taken: dict[int, int] = {}
        # Per job row: the type of its single-job lease (-1: none) and where each entity
        # holds GPUs (by its first member's row); pairs' keys. Arrays so that a round
        # touches only the leases that change.
        self._held_type = np.full(0, -1, dtype=np.int64)
        self._parts = np.empty(0, dtype=object)
        self._pair_keys: set[EntityKey] = set()
        self._symmetric = [
            _symmetric_nodes(state, t) if symmetric_fast_path else None
            for t in range(len(type_names))
        ]

    def counts(self) -> LeaseCounts:
        return LeaseCounts(self.extensions, self.opportunities, self.failures)

    def start_round(
        self,
        rows_a: IntArray,
        rows_b: IntArray,
        types: IntArray,
        spec_of: Callable[[int], JobSpec],
        active: BoolArray,
    ) -> tuple[IntArray, BoolArray]:
        """Apply this round's choice: entity i has job rows ``rows_a[i]``, ``rows_b[i]``
        (-1 for a single job) and runs on type ``types[i]``, in priority order;
        ``spec_of(i)`` is the spec to place for it (asked only for entities that need
        GPUs). ``active`` flags job rows still running (only their leases count as
        extension opportunities, as in Gavel).

        Returns the positions that got GPUs (ascending) and, for each, whether its lease
        was extended. Work per round: numpy over the chosen entities, Python only for
        the leases that end and the entities that are placed anew.
        """
        started = time.perf_counter()
        n_rows = len(active)
        self._grow_rows(n_rows)
        held = self._held_type[:n_rows]
        single = rows_b < 0
        held_rows = np.flatnonzero(held >= 0)
        self.opportunities += int(active[held_rows].sum())
        self.opportunities += sum(
            1 for a, b in self._pair_keys if active[a] or (b >= 0 and active[b])
        )
        extended = np.zeros(len(rows_a), dtype=bool)
        extended[single] = held[rows_a[single]] == types[single]
        kept_pairs: set[EntityKey] = set()
        for i in np.flatnonzero(~single).tolist():
            key = (int(rows_a[i]), int(rows_b[i]))
            lease = self.leases.get(key)
            if lease is not None and lease.type_index == int(types[i]):
                extended[i] = True
                kept_pairs.add(key)
        self.extensions += int(extended.sum())
        # Release every lease not extended: singles by mask, pairs one by one.
        keep_row = np.zeros(n_rows, dtype=bool)
        keep_row[rows_a[extended & single]] = True
        ending = held_rows[~keep_row[held_rows]]
        leases, state = self.leases, self.state
        for row in ending.tolist():
            lease = leases.pop((row, -1))
            if lease.gang:
                state.release_gang(lease.holder)
            else:
                state.release(lease.holder)
        held[ending] = -1
        for key in [k for k in self._pair_keys if k not in kept_pairs]:
            self._release(self.leases.pop(key))
            self._pair_keys.discard(key)
        # Place the rest, largest demand first (stable: priority order among equals).
        got = np.zeros(len(rows_a), dtype=bool)
        got[extended] = True
        self._idle.clear()
        fresh = np.flatnonzero(~extended).tolist()
        if fresh:
            specs = [spec_of(i) for i in fresh]
            order = sorted(range(len(fresh)), key=lambda m: -specs[m].total_gpu_milli)
            ra, rb, ty = rows_a[fresh].tolist(), rows_b[fresh].tolist(), types[fresh].tolist()
            symmetric = self._symmetric
            batch: list[tuple[int, int, JobSpec]] = []  # (position, type, typed spec)
            for m in order:
                i, spec, t = fresh[m], specs[m], ty[m]
                key = (ra[m], rb[m])
                nodes = symmetric[t]
                if nodes is not None and spec.gpu_milli == MILLI_PER_GPU:
                    self._place_batch(batch, rows_a, rows_b, got)
                    self._place_symmetric(key, t, spec, nodes, i, got)
                    continue
                job = self._typed_spec(key, t, spec)
                if self.span_nodes and job.may_span_nodes and job.num_gpu > 1:
                    self._place_batch(batch, rows_a, rows_b, got)
                    self._idle.clear()  # the strategy may take whole free nodes of any type
                    self._keep(key, t, self._place_one(key, t, job), i, got)
                else:
                    batch.append((i, t, job))
            self._place_batch(batch, rows_a, rows_b, got)
        placed = np.flatnonzero(got)
        self.seconds += time.perf_counter() - started
        return placed, extended[placed]

    def parts_of(self, rows_a: IntArray) -> tuple[tuple[Assignment, ...], ...]:
        """Where each entity (by the row of its first member) holds GPUs now."""
        return tuple(self._parts[rows_a])

    def _grow_rows(self, n_rows: int) -> None:
        if n_rows <= len(self._held_type):
            return
        size = max(n_rows, 2 * len(self._held_type))
        held = np.full(size, -1, dtype=np.int64)
        held[: len(self._held_type)] = self._held_type
        parts = np.empty(size, dtype=object)
        parts[: len(self._parts)] = self._parts
        self._held_type, self._parts = held, parts

    def _typed_spec(self, key: EntityKey, t: int, spec: JobSpec) -> JobSpec:
        job = self._typed.get((key, t))
        if job is None:
            job = replace(spec, id=holder_id(key), allowed_models=self.allowed[t])
            self._typed[(key, t)] = job
            for row in key:
                if row >= 0:
                    self._keys_of_row.setdefault(row, []).append((key, t))
        return job

    def _keep(self, key: EntityKey, t: int, lease: Lease | None, i: int, got: BoolArray) -> None:
        """Record a placement attempt's outcome for entity position ``i``."""
        if lease is None:
            self.failures += 1
            return
        self.leases[key] = lease
        self.placements += 1
        got[i] = True
        a, b = key
        if b < 0:
            self._held_type[a] = t
        else:
            self._pair_keys.add(key)
        holder = lease.holder
        gang = self.state.gangs.get(holder)
        self._parts[a] = gang if gang is not None else (self.state.assignments[holder],)

    def _place_batch(
        self,
        batch: list[tuple[int, int, JobSpec]],
        rows_a: IntArray,
        rows_b: IntArray,
        got: BoolArray,
    ) -> None:
        """Place a run of single-node jobs with ``place_many`` (the strategy's batch path:
        same decisions as one ``place`` each, in order)."""
        if not batch:
            return
        self._idle.clear()  # the strategy may take whole free nodes of any type
        result = place_many(self.strategy, self.state, [job for _, _, job in batch], self.rng)
        by_holder = {a.job_id: a for a in result.placed}
        for i, t, job in batch:
            key = (int(rows_a[i]), int(rows_b[i]))
            a = by_holder.get(job.id)
            lease = None if a is None else Lease(key, t, job.id, (a.node,), gang=False)
            self._keep(key, t, lease, i, got)
        batch.clear()

    def forget(self, rows: list[int]) -> None:
        """Drop cached specs of finished jobs (work in the number finished)."""
        for row in rows:
            for key in self._keys_of_row.pop(row, ()):
                self._typed.pop(key, None)

    def release_all(self) -> None:
        for lease in self.leases.values():
            self._release(lease)
        self.leases = {}
        self._pair_keys.clear()
        self._held_type[:] = -1

    def _release(self, lease: Lease) -> None:
        if lease.gang:
            self.state.release_gang(lease.holder)
        else:
            self.state.release(lease.holder)

    def _place_one(self, key: EntityKey, t: int, job: JobSpec) -> Lease | None:
        """A multi-GPU job that may span nodes: one node through the strategy, else a gang."""
        a = self.strategy.place(self.state, job, self.rng)
        if a is not None:
            self.state.allocate(a)
            return Lease(key, t, job.id, (a.node,), gang=False)
        return self._place_gang(key, t, job)

    def _place_symmetric(
        self, key: EntityKey, t: int, job: JobSpec, nodes: np.ndarray, i: int, got: BoolArray
    ) -> None:
        """Whole GPUs on identical one-GPU nodes: the lowest-index free ones (see module doc).

        ``job`` is the entity's spec (the holder id comes from ``key``; the type is ``t``)."""
        state = self.state
        k = job.num_gpu
        if k > 1 and not (self.span_nodes and job.may_span_nodes):
            self.failures += 1
            return
        cpu_need, memory_need = job.cpu_milli // k, job.memory_mib // k
        cached = not (cpu_need or memory_need) and t in self._idle
        if cached:
            # The free nodes of the type, listed once per run of such placements; each
            # placement takes the next k (the lowest-index free ones, as a fresh scan would).
            idle, cursor = self._idle[t], self._taken[t]
        else:
            # Nodes of one type are usually one contiguous block: a slice is a view, while
            # fancy indexing copies.
            first, last = int(nodes[0]), int(nodes[-1])
            if last - first + 1 == len(nodes):
                free_nodes = np.flatnonzero(state.gpu_free[first : last + 1, 0] == MILLI_PER_GPU)
                free_nodes += first
            else:
                free_nodes = nodes[state.gpu_free[nodes, 0] == MILLI_PER_GPU]
            cursor = 0
            if cpu_need or memory_need:
                free_nodes = free_nodes[
                    (state.cpu_free[free_nodes] >= cpu_need)
                    & (state.memory_free[free_nodes] >= memory_need)
                ]
                self._idle.pop(t, None)  # this placement takes nodes the list may hold
            idle = free_nodes.tolist()
            if not (cpu_need or memory_need):
                self._idle[t] = idle
                cached = True
        if cursor + k > len(idle):
            if cached:
                self._taken[t] = cursor
            self.failures += 1
            return
        if cached:
            self._taken[t] = cursor + k
        holder = holder_id(key)
        if k == 1:
            node = idle[cursor]
            parts: tuple[Assignment, ...] = (
                Assignment(holder, node, (0,), MILLI_PER_GPU, cpu_need, memory_need),
            )
            state.allocate(parts[0])
            lease = Lease(key, t, holder, (node,), gang=False)
        else:
            free = idle[cursor : cursor + k]
            parts = tuple(
                Assignment(holder, node, (0,), MILLI_PER_GPU, cpu_need, memory_need)
                for node in free
            )
            state.allocate_gang(parts)
            lease = Lease(key, t, holder, tuple(free), gang=True)
        self.fast_placements += 1
        self.leases[key] = lease
        self.placements += 1
        got[i] = True
        a, b = key
        if b < 0:
            self._held_type[a] = t
        else:
            self._pair_keys.add(key)
        self._parts[a] = parts

    def _place_gang(self, key: EntityKey, t: int, job: JobSpec) -> Lease | None:
        """One GPU at a time through the strategy, then one gang (all or nothing)."""
        parts = gang_parts(self.state, self.strategy, job, self.rng)
        if parts is None:
            return None
        self.state.allocate_gang(parts)
        return Lease(key, t, job.id, tuple(p.node for p in parts), gang=True)


def _symmetric_nodes(state: ClusterState, t: int) -> np.ndarray | None:
    """Nodes of type ``t`` if they all hold one GPU and equal CPU and memory, else None."""
    nodes = np.flatnonzero(state.node_model == t)
    if len(nodes) == 0 or (state.num_gpus[nodes] != 1).any():
        return None
    if np.ptp(state.cpu_capacity[nodes]) or np.ptp(state.memory_capacity[nodes]):
        return None
    return nodes


def holder_id(key: EntityKey) -> int:
    """A single job holds its GPUs under its row; a pair under a negative id."""
    a, b = key
    return a if b < 0 else -(1 + a * (1 << 31) + b)
