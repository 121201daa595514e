"""ScoredPlacement: filter -> weighted sum of scorers -> best node -> GPUs.

One class serves every scored strategy: a single scorer is a combination of one member
(weight 1000, as the reference configures single plugins).

Speed: raw scores are node-local (they read only the node's state and the job's shape),
so the strategy keeps, per job shape, every node's raw score per member (-inf where the
node fails the filter) and the GPU the chooser would take there. A decision re-scores
only the nodes whose ``node_version`` moved since that shape was last placed -- one
node per task in a fill replay -- and nodes in the same state are scored once (an empty
cluster has a handful of distinct node states). The arrays are kept in the order of the
run's tie-break permutation, so ``argmax`` (first maximum) is the whole decision.
Normalization (min-max for BestFit and PWR) needs every feasible node and runs at each
decision over the cached raw scores.

A strategy of one compiled scorer (FGD, worst fit: ``CompiledScorer``) keeps the
same index but runs the whole per-job step -- re-test and re-score the stale nodes, take
the first best position, pick the GPUs -- in ``placement.kernel.place_run``; ``place_run``
here places a run of same-shape jobs with one kernel call that also allocates them.

Ties: the highest total wins; among equal totals the node that comes first in a random
permutation of the nodes wins. The permutation is drawn from the ``rng`` of the first
``place`` call on a given ClusterState and kept for every later call on that state: one
fixed node order per run, as the reference shuffles node names once per run with its seed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import Assignment, BookkeepingError, ClusterState
from gpumosaic.placement.filter import FilterKey, feasible_among, filter_key
from gpumosaic.placement.gpu_choice import exclusive_gpus
from gpumosaic.placement.scorers.base import (
    CompiledScorer,
    KernelInputs,
    Nodes,
    Scorer,
    Scores,
)

ShapeKey = tuple[int, int, int]
# Above this many nodes to re-score, group them by state first (np.unique costs ~0.1 ms).
_DEDUPE_FROM = 48


@dataclass(frozen=True, slots=True)
class Member:
    scorer: Scorer
    weight: float


@dataclass(slots=True)
class _RawCache:
    """Raw scores of one scorer for one job shape, and the node versions they were for."""

    raw: npt.NDArray[np.float64]
    version: npt.NDArray[np.int64]


@dataclass(slots=True)
class _ShapeIndex:
    """Per job shape: each member's raw score per node (in tie-break order, -inf where the
    node fails the filter), the GPU the chooser takes there (-1: chosen on demand), and
    the node versions these were computed for (in node order)."""

    version: npt.NDArray[np.int64]
    raw: list[npt.NDArray[np.float64]]
    slot: npt.NDArray[np.intp]
    inputs: KernelInputs | None = None  # what the compiled scorer reads for this shape


@dataclass(slots=True)
class _CompiledShape:
    """One job shape's call of ``kernel.place_run``: the arguments after (count, apply),
    the GPU slots a job takes, and the one-job output buffers."""

    run: Callable[..., int]
    args: tuple[object, ...]
    taken: int
    node: npt.NDArray[np.int64]
    gpus: npt.NDArray[np.int64]
    gpus_row: npt.NDArray[np.int64]


class ScoredPlacement:
    """A PlacementStrategy built from weighted scorers; the GPU choice inside the chosen
    node is the one of the highest-weight member (the first one on equal weights)."""

    def __init__(self, name: str, members: tuple[Member, ...]) -> None:
        if not members:
            raise ValueError("a scored placement needs at least one scorer")
        self.name = name
        self.members = members
        self.gpu_chooser = max(members, key=lambda m: m.weight).scorer
        self._chooser_index = next(i for i, m in enumerate(members) if m.scorer is self.gpu_chooser)
        self._normalized = any(type(m.scorer).normalize is not Scorer.normalize for m in members)
        self._dedupe = not any(m.scorer.reads_node_index for m in members)
        # One scorer with a compiled kernel: every decision runs in placement.kernel.
        only = members[0].scorer
        self._compiled = only if len(members) == 1 and isinstance(only, CompiledScorer) else None
        self._state: ClusterState | None = None
        self._rank: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._perm: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._index: dict[FilterKey, _ShapeIndex] = {}
        self._cache: dict[ShapeKey, list[_RawCache]] = {}
        self._shapes: dict[FilterKey, _CompiledShape] = {}

    # -- decisions ----------------------------------------------------------------
    def place(
        self, state: ClusterState, job: JobSpec, rng: np.random.Generator
    ) -> Assignment | None:
        choice = self.choose(state, job, rng)
        if choice is None:
            return None
        node, gpus = choice
        return Assignment(
            job_id=job.id,
            node=node,
            gpus=gpus,
            gpu_milli=job.gpu_milli if job.num_gpu else 0,
            cpu_milli=job.cpu_milli,
            memory_mib=job.memory_mib,
        )

    def choose(
        self, state: ClusterState, job: JobSpec, rng: np.random.Generator
    ) -> tuple[int, tuple[int, ...]] | None:
        """(node, GPU slots) for ``job`` on ``state``, or None when no node passes the
        filter. Mutates nothing (but the strategy's caches)."""
        if self._state is not state:
            self._bind(state, rng)
        if self._compiled is not None:
            return self._choose_compiled(state, job)
        index = self._index.get(filter_key(job))
        if index is None:
            index = self._new_index(job)
        self._sync(state, job, index)
        pos = self._decide(index)
        if pos < 0:
            return None
        node = int(self._perm[pos])
        if job.num_gpu == 0:
            return node, ()
        if not job.is_fractional:
            return node, exclusive_gpus(state.gpu_free[node], job.num_gpu)
        slot = int(index.slot[pos])
        if slot < 0:
            slot = self.gpu_chooser.fractional_slot(state, job, node, rng)
        return node, (slot,)

    def place_run(
        self, state: ClusterState, jobs: Sequence[JobSpec], rng: np.random.Generator
    ) -> list[Assignment]:
        """Place ``jobs`` (one shape: equal ``filter_key``) in order and allocate each on
        ``state`` before the next; stop at the first that finds no node (the later ones
        cannot fit either). The same decisions as a loop of ``place`` + ``allocate``."""
        if not jobs:
            return []
        if self._state is not state:
            self._bind(state, rng)
        if self._compiled is None:
            placed: list[Assignment] = []
            for job in jobs:
                a = self.place(state, job, rng)
                if a is None:
                    break
                state.allocate(a)
                placed.append(a)
            return placed
        ids = {job.id for job in jobs}
        if (
            len(ids) != len(jobs)
            or not state.assignments.keys().isdisjoint(ids)  # iterates over ids
            or not state.gangs.keys().isdisjoint(ids)
        ):
            raise BookkeepingError("a job of the run is listed twice or already placed")
        count, nodes, gpus = self._run_compiled(state, jobs, apply=True)
        job = jobs[0]
        milli = job.gpu_milli if job.num_gpu else 0
        out = [
            Assignment(j.id, node, tuple(slots), milli, j.cpu_milli, j.memory_mib)
            for j, node, slots in zip(
                jobs[:count], nodes[:count].tolist(), gpus[:count].tolist(), strict=True
            )
        ]
        state.adopt(out)
        return out

    def place_run_arrays(
        self, state: ClusterState, job: JobSpec, count: int, rng: np.random.Generator
    ) -> tuple[int, npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
        """``place_run`` for ``count`` jobs of ``job``'s shape without building their
        assignments: (how many placed, their nodes, their GPU slots, one row each); the
        resources are taken and the caller records the holders
        (``ClusterState.adopt_rows``). None when this strategy has no compiled kernel."""
        if self._state is not state:
            self._bind(state, rng)
        if self._compiled is None:
            return None
        return self._run_compiled(state, [job] * count, apply=True)

    def _run_compiled(
        self, state: ClusterState, jobs: Sequence[JobSpec], *, apply: bool
    ) -> tuple[int, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """``kernel.place_run`` for jobs of one shape: (how many placed, their nodes,
        their GPU slots (count, slots taken))."""
        shape = self._compiled_shape(state, jobs[0])
        count = len(jobs) if apply else 1
        nodes = np.empty(count, dtype=np.int64)
        gpus = np.empty((count, max(shape.taken, 1)), dtype=np.int64)
        placed = shape.run(count, apply, *shape.args, nodes, gpus)
        return placed, nodes, gpus[:, : shape.taken]

    def _choose_compiled(
        self, state: ClusterState, job: JobSpec
    ) -> tuple[int, tuple[int, ...]] | None:
        """``choose`` in one kernel call with the shape's prepared arguments."""
        shape = self._shapes.get(filter_key(job))
        if shape is None:
            shape = self._compiled_shape(state, job)
        if not shape.run(1, False, *shape.args, shape.node, shape.gpus):
            return None
        return int(shape.node[0]), tuple(shape.gpus_row.tolist())

    def _compiled_shape(self, state: ClusterState, job: JobSpec) -> _CompiledShape:
        key = filter_key(job)
        shape = self._shapes.get(key)
        if shape is not None:
            return shape
        from gpumosaic.placement import kernel

        scorer = self._compiled
        assert scorer is not None
        index = self._index.get(key)
        if index is None:
            index = self._new_index(job)
        k = index.inputs = scorer.kernel_inputs(state, job)
        taken = 0 if job.num_gpu == 0 else (1 if job.is_fractional else job.num_gpu)
        # Everything the kernel reads keeps its identity for the run (arrays are updated
        # in place), so the arguments are gathered once per shape.
        args = (
            scorer.kernel_kind, k.exact, job.num_gpu, job.gpu_milli if job.num_gpu else 0,
            job.cpu_milli, job.memory_mib,
            state.model_mask(job.allowed_models if job.num_gpu else None),
            state.gpu_free, state.gpu_tasks, state.cpu_free, state.memory_free,
            state.kind_count, state.node_version, index.version, index.raw[0], index.slot,
            self._rank, self._perm, k.cpu_scale, k.class_ok, k.c_cpu, k.c_num_gpu, k.weight,
            k.fit_table, k.below_table, k.fit_count, k.below, k.free, k.frag, k.tracked,
            k.d_fit, k.d_below, k.thresholds,
        )  # fmt: skip
        gpus = np.zeros((1, max(taken, 1)), dtype=np.int64)
        shape = _CompiledShape(
            kernel.place_run, args, taken, np.zeros(1, dtype=np.int64), gpus, gpus[0, :taken]
        )
        self._shapes[key] = shape
        return shape

    def bind(self, state: ClusterState, rng: np.random.Generator) -> None:
        """Draw this run's node order from ``rng`` (once per state; later calls keep it)."""
        self._bind(state, rng)

    def _decide(self, index: _ShapeIndex) -> int:
        """Position (in tie-break order) of the best feasible node, -1 if none."""
        if not self._normalized:
            total = self.members[0].weight * index.raw[0]
            for member, raw in zip(self.members[1:], index.raw[1:], strict=True):
                total += member.weight * raw
            pos = int(np.argmax(total))
            return pos if total[pos] > -np.inf else -1
        feasible = np.flatnonzero(index.raw[0] > -np.inf)
        if not len(feasible):
            return -1
        total = np.zeros(len(feasible))
        for member, raw in zip(self.members, index.raw, strict=True):
            total += member.weight * member.scorer.normalize(raw[feasible])
        return int(feasible[np.argmax(total)])

    # -- the per-shape index ------------------------------------------------------
    def _new_index(self, job: JobSpec) -> _ShapeIndex:
        n = len(self._perm)
        index = _ShapeIndex(
            version=np.full(n, -1, dtype=np.int64),
            raw=[np.full(n, -np.inf) for _ in self.members],
            slot=np.full(n, -1, dtype=np.intp),
        )
        self._index[filter_key(job)] = index
        return index

    def _sync(self, state: ClusterState, job: JobSpec, index: _ShapeIndex) -> None:
        """Re-score the nodes that changed since this shape was last placed."""
        stale = np.flatnonzero(index.version != state.node_version)
        if not len(stale):
            return
        index.version[stale] = state.node_version[stale]
        pos = self._rank[stale]
        for raw in index.raw:
            raw[pos] = -np.inf
        index.slot[pos] = -1
        ok = feasible_among(state, job, stale)
        nodes, pos = stale[ok], pos[ok]
        if not len(nodes):
            return
        inverse = None
        if self._dedupe and len(nodes) >= _DEDUPE_FROM:
            first, inverse = _distinct_rows(state.node_signature(nodes))
            nodes = nodes[first]
        for i, member in enumerate(self.members):
            raw, slots = member.scorer.scores_and_slots(state, job, nodes)
            if inverse is not None:
                raw = raw[inverse]
                slots = None if slots is None else slots[inverse]
            index.raw[i][pos] = raw
            if i == self._chooser_index and slots is not None:
                index.slot[pos] = slots

    # -- scores of given nodes (Gandiva's ranking) --------------------------------
    def scores(self, state: ClusterState, job: JobSpec, nodes: Nodes) -> Scores:
        """Weighted sum of normalized member scores for ``nodes`` (not filtered)."""
        key = (job.cpu_milli, job.gpu_milli if job.num_gpu else 0, job.num_gpu)
        entries = self._cache.get(key)
        if entries is None:
            n = state.num_nodes
            entries = [_RawCache(np.zeros(n), np.full(n, -1, dtype=np.int64)) for _ in self.members]
            self._cache[key] = entries
        version = state.node_version
        total = np.zeros(len(nodes))
        for member, entry in zip(self.members, entries, strict=True):
            stale = nodes[entry.version[nodes] != version[nodes]]
            if len(stale):
                entry.raw[stale] = member.scorer.raw_scores(state, job, stale)
                entry.version[stale] = version[stale]
            total += member.weight * member.scorer.normalize(entry.raw[nodes])
        return total

    def node_order(self, state: ClusterState, rng: np.random.Generator) -> npt.NDArray[np.int64]:
        """Position of each node in this run's tie-break permutation."""
        self._bind(state, rng)
        return self._rank

    def _bind(self, state: ClusterState, rng: np.random.Generator) -> None:
        if self._state is state:
            return
        self._state = state
        self._perm = rng.permutation(state.num_nodes)
        self._rank = np.empty(state.num_nodes, dtype=np.int64)
        self._rank[self._perm] = np.arange(state.num_nodes)
        self._cache = {}
        self._index = {}
        self._shapes = {}


def _distinct_rows(
    rows: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """(index of the first row of each distinct value, group of every row), grouping
    exactly by the rows' bytes (a dict: ``np.unique(axis=0)`` sorts and is ~20x slower)."""
    keys = np.ascontiguousarray(rows).view(np.dtype((np.void, rows.shape[1] * 8))).ravel()
    groups: dict[object, int] = {}  # bytes per row
    inverse = [groups.setdefault(k, len(groups)) for k in keys.tolist()]
    inv = np.array(inverse, dtype=np.intp)
    first = np.full(len(groups), len(inv), dtype=np.intp)
    np.minimum.at(first, inv, np.arange(len(inv)))
    return first, inv
