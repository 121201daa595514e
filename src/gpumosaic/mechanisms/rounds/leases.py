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
from dataclasses import dataclass, replace

import numpy as np

from gpumosaic.mechanisms.gang import gang_parts
from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement.base import PlacementStrategy

EntityKey = tuple[int, int]  # (row of job a, row of job b or -1)


@dataclass(frozen=True, slots=True)
class Lease:
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
        self.extensions = 0
        self.opportunities = 0
        self.failures = 0
        self.seconds = 0.0  # spent placing and releasing (reported by the benchmark)
        self.fast_placements = 0
        self._symmetric = [
            _symmetric_nodes(state, t) if symmetric_fast_path else None
            for t in range(len(type_names))
        ]

    def counts(self) -> LeaseCounts:
        return LeaseCounts(self.extensions, self.opportunities, self.failures)

    def start_round(
        self, chosen: list[tuple[EntityKey, int, JobSpec]], active: np.ndarray
    ) -> tuple[list[int], set[int]]:
        """Apply this round's choice; returns the indices into ``chosen`` that got GPUs
        (in order) and, among them, those whose lease was extended.

        ``chosen`` holds (entity key, type index, the spec to place) in priority order;
        ``active`` flags job rows still running (only their leases count as extension
        opportunities, as in Gavel).
        """
        started = time.perf_counter()
        kept: dict[EntityKey, Lease] = {}
        placed: list[int] = []
        to_place: list[int] = []
        extended: set[int] = set()
        for key in self.leases:
            if active[key[0]] or (key[1] >= 0 and active[key[1]]):
                self.opportunities += 1
        for i, (key, t, _) in enumerate(chosen):
            lease = self.leases.get(key)
            if lease is not None and lease.type_index == t:
                kept[key] = lease
                placed.append(i)
                extended.add(i)
                self.extensions += 1
            else:
                to_place.append(i)
        for key, lease in self.leases.items():
            if key not in kept:
                self._release(lease)
        self.leases = kept
        to_place.sort(key=lambda i: -chosen[i][2].total_gpu_milli)
        for i in to_place:
            key, t, spec = chosen[i]
            lease = self._place(key, t, spec)
            if lease is None:
                self.failures += 1
                continue
            self.leases[key] = lease
            placed.append(i)
        placed.sort()
        self.seconds += time.perf_counter() - started
        return placed, extended

    def forget(self, rows: list[int]) -> None:
        """Drop cached specs of finished jobs."""
        done = set(rows)
        self._typed = {
            k: v for k, v in self._typed.items() if k[0][0] not in done and k[0][1] not in done
        }

    def release_all(self) -> None:
        for lease in self.leases.values():
            self._release(lease)
        self.leases = {}

    def _release(self, lease: Lease) -> None:
        if lease.gang:
            self.state.release_gang(lease.holder)
        else:
            self.state.release(lease.holder)

    def _place(self, key: EntityKey, t: int, spec: JobSpec) -> Lease | None:
        holder = holder_id(key)
        job = self._typed.get((key, t))
        if job is None:
            job = replace(spec, id=holder, allowed_models=self.allowed[t])
            self._typed[(key, t)] = job
        nodes = self._symmetric[t]
        if nodes is not None and job.gpu_milli == MILLI_PER_GPU:
            return self._place_symmetric(key, t, job, nodes)
        a = self.strategy.place(self.state, job, self.rng)
        if a is not None:
            self.state.allocate(a)
            return Lease(key, t, holder, (a.node,), gang=False)
        if not (self.span_nodes and job.may_span_nodes and job.num_gpu > 1):
            return None
        return self._place_gang(key, t, job)

    def _place_symmetric(
        self, key: EntityKey, t: int, job: JobSpec, nodes: np.ndarray
    ) -> Lease | None:
        """Whole GPUs on identical one-GPU nodes: the lowest-index free ones (see module doc)."""
        state = self.state
        k = job.num_gpu
        if k > 1 and not (self.span_nodes and job.may_span_nodes):
            return None
        cpu_need, memory_need = job.cpu_milli // k, job.memory_mib // k
        # Nodes of one type are usually one contiguous block: a slice is a view, while
        # fancy indexing copies (this runs for every placement of every round).
        first, last = int(nodes[0]), int(nodes[-1])
        if last - first + 1 == len(nodes):
            idle = np.flatnonzero(state.gpu_free[first : last + 1, 0] == MILLI_PER_GPU) + first
        else:
            idle = nodes[state.gpu_free[nodes, 0] == MILLI_PER_GPU]
        if cpu_need or memory_need:
            idle = idle[
                (state.cpu_free[idle] >= cpu_need) & (state.memory_free[idle] >= memory_need)
            ]
        free = idle[:k]
        if len(free) < k:
            return None
        parts = tuple(
            Assignment(job.id, int(node), (0,), MILLI_PER_GPU, cpu_need, memory_need)
            for node in free
        )
        if k == 1:
            state.allocate(parts[0])
        else:
            state.allocate_gang(parts)
        self.fast_placements += 1
        return Lease(key, t, job.id, tuple(p.node for p in parts), gang=k > 1)

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
