"""ScoredPlacement: filter -> weighted sum of scorers -> best node -> GPUs.

One class serves every scored strategy: a single scorer is a combination of one member
(weight 1000, as the reference configures single plugins).

Every decision runs in compiled code (``placement.kernel.place_run``): per job shape the
strategy keeps an index of its candidate nodes (those of a GPU model the shape allows; no
other node ever passes its filter) with each one's raw score per member (-inf where the
node fails the filter) and the GPU the chooser would take there, in the order of the
run's tie-break permutation. A decision re-tests and re-scores only the candidates whose
``node_version`` moved since that shape was last placed -- one node per task in a fill
replay -- and takes the first best position: for one member without normalization its
raw score decides (a max tournament over the positions keeps the first best in
O(log P) per re-scored node); otherwise the weighted sum of the members' normalized
scores (min-max for BestFit and PWR needs every feasible node, so it is taken at each
decision). ``place_run`` places a run of same-shape jobs with one kernel call that also
allocates them; ``shape_run`` hands that call to a caller that keeps it (the round
mechanism's lease book).

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

from gpumosaic.errors import BookkeepingError
from gpumosaic.kernel_cache import jit, resolve
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement.filter import FilterKey, filter_key, job_args
from gpumosaic.placement.scorers.base import (
    KernelInputs,
    Nodes,
    Scorer,
    Scores,
    cluster_args,
)

ShapeKey = tuple[int, int, int]


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
class ShapeRun:
    """One job shape's call of ``kernel.place_run``: the arguments after (count, apply)
    (the shape's index among them, updated in place by the kernel), the GPU slots a job
    takes, and the one-job output buffers. ``run(count, True, *args, nodes, gpus)``
    places and allocates up to ``count`` jobs of the shape (``ScoredPlacement.place_run_arrays``
    says what it writes); valid while the strategy stays bound to the same state."""

    run: Callable[..., int]  # kernel.place_run, bound once (no import per call)
    binding: int  # the strategy's binding it belongs to (``ScoredPlacement.current``)
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
        self._kinds = np.array([m.scorer.kernel_kind for m in members], dtype=np.int64)
        self._object_mode = any(m.scorer.object_mode for m in members)
        self._weights = np.array([m.weight for m in members], dtype=np.float64)
        self._all_equal = np.array(
            [np.nan if m.scorer.all_equal is None else m.scorer.all_equal for m in members],
            dtype=np.float64,
        )
        self._state: ClusterState | None = None
        self._binding = 0
        self._rank: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._perm: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._pristine: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._classes = 0
        self._cache: dict[ShapeKey, list[_RawCache]] = {}
        self._shapes: dict[FilterKey, ShapeRun] = {}

    # -- decisions ----------------------------------------------------------------
    def place(
        self, state: ClusterState, job: JobSpec, rng: np.random.Generator
    ) -> Assignment | None:
        choice = self.choose(state, job, rng)
        if choice is None:
            return None
        return Assignment.of(job, *choice)

    def choose(
        self, state: ClusterState, job: JobSpec, rng: np.random.Generator
    ) -> tuple[int, tuple[int, ...]] | None:
        """(node, GPU slots) for ``job`` on ``state``, or None when no node passes the
        filter. Mutates nothing (but the strategy's index), in one kernel call."""
        if self._state is not state:
            self._bind(state, rng)
        shape = self._shapes.get(filter_key(job))
        if shape is None:
            shape = self._shape(state, job)
        if not shape.run(1, False, *shape.args, shape.node, shape.gpus):
            return None
        return int(shape.node[0]), tuple(shape.gpus_row.tolist())

    def place_run(
        self, state: ClusterState, jobs: Sequence[JobSpec], rng: np.random.Generator
    ) -> list[Assignment]:
        """Place ``jobs`` (one shape: equal ``filter_key``) in order and allocate each on
        ``state`` before the next; stop at the first that finds no node (the later ones
        cannot fit either). The same decisions as a loop of ``place`` + ``allocate``, in
        one kernel call."""
        if not jobs:
            return []
        if self._state is not state:
            self._bind(state, rng)
        _check_new_run(state, jobs)
        shape = self._shapes.get(filter_key(jobs[0]))
        if shape is None:
            shape = self._shape(state, jobs[0])
        nodes = np.empty(len(jobs), dtype=np.int64)
        gpus = np.empty((len(jobs), max(shape.taken, 1)), dtype=np.int64)
        count = shape.run(len(jobs), True, *shape.args, nodes, gpus)
        return _adopt_run(state, jobs, count, nodes, gpus[:, : shape.taken])

    def place_run_arrays(
        self, state: ClusterState, job: JobSpec, count: int, rng: np.random.Generator
    ) -> tuple[int, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """``place_run`` for ``count`` jobs of ``job``'s shape without building their
        assignments: (how many placed, their nodes, their GPU slots, one row each). The
        resources are taken; the caller records the holders (``ClusterState.adopt_rows``)."""
        shape = self.shape_run(state, job, rng)
        nodes = np.empty(count, dtype=np.int64)
        gpus = np.empty((count, max(shape.taken, 1)), dtype=np.int64)
        placed = shape.run(count, True, *shape.args, nodes, gpus)
        return placed, nodes, gpus[:, : shape.taken]

    def shape_run(self, state: ClusterState, job: JobSpec, rng: np.random.Generator) -> ShapeRun:
        """The compiled run of ``job``'s shape on ``state``, for a caller that places many
        runs of it (the round mechanism's lease book keeps it per shape and type)."""
        if self._state is not state:
            self._bind(state, rng)
        shape = self._shapes.get(filter_key(job))
        if shape is None:
            shape = self._shape(state, job)
        return shape

    def current(self, shape: ShapeRun) -> bool:
        """Whether ``shape`` still belongs to this strategy's binding (a bind to another
        state starts new indexes)."""
        return shape.binding == self._binding

    def _shape(self, state: ClusterState, job: JobSpec) -> ShapeRun:
        """A new shape's index and kernel arguments. Everything the kernel reads keeps
        its identity for the run (arrays are updated in place), so they are gathered once."""
        inputs = KernelInputs.unused()
        for member in self.members:
            inputs = member.scorer.kernel_inputs(state, job, inputs)
        model_ok = state.model_mask(job.allowed_models if job.num_gpu else None)
        # Candidates: the nodes of an allowed model, in tie-break order (no other node
        # ever passes this shape's filter, so its index leaves them out).
        perm = self._perm[model_ok[self._perm]] if job.num_gpu else self._perm
        rank = np.full(len(self._perm), -1, dtype=np.int64)
        rank[perm] = np.arange(len(perm))
        n = len(perm)
        leaves = 1 << max(n - 1, 0).bit_length()  # the least power of two >= n
        index = (
            np.full(n, -1, dtype=np.int64),  # node version each position was scored at
            np.full((len(self.members), n), -np.inf),  # raw score per member, by position
            np.full(n, -1, dtype=np.int64),  # the chooser's GPU, by position
            rank,
            perm,
            np.empty(n, dtype=np.int64),  # scratch: feasible (or re-scored) positions
            np.empty(n),  # scratch: one member's normalized scores
            np.empty(n),  # scratch: totals
            self._pristine,
            np.full((len(self.members), self._classes), -np.inf),  # untouched nodes' scores,
            np.full(self._classes, -1, dtype=np.int64),  # their GPU,
            np.zeros(self._classes, dtype=bool),  # known yet, per capacity class
            np.full(2 * leaves, -np.inf),  # max tournament over raw[0] (one plain member)
        )
        members = (
            self._kinds,
            self._weights,
            self._all_equal,
            self._chooser_index,
            inputs.cpu_scale,
        )
        args = (
            job_args(job),
            model_ok,
            cluster_args(state),
            members,
            inputs.fgd_args(),
            inputs.pwr_args(),
            index,
        )
        taken = 0 if job.num_gpu == 0 else (1 if job.is_fractional else job.num_gpu)
        gpus = np.zeros((1, max(taken, 1)), dtype=np.int64)
        node = np.zeros(1, dtype=np.int64)
        # Every call passes (int, bool, *args, int64 vector, int64 matrix), fresh C arrays:
        # the types are checked once here (an ahead-of-time function trusts them).
        # A member that calls back into Python (object mode) runs on numba's JIT only.
        if self._object_mode:
            run = jit(_place_run())
        else:
            run = resolve(_place_run(), 1, False, *args, node, gpus)
        shape = ShapeRun(run, self._binding, args, taken, node, gpus, gpus[0, :taken])
        self._shapes[filter_key(job)] = shape
        return shape

    def bind(self, state: ClusterState, rng: np.random.Generator) -> None:
        """Draw this run's node order from ``rng`` (once per state; later calls keep it)."""
        self._bind(state, rng)

    # -- scores of given nodes (Gandiva's ranking, the extender) --------------------
    def scores(self, state: ClusterState, job: JobSpec, nodes: Nodes) -> Scores:
        """Weighted sum of normalized member scores for ``nodes`` (not filtered)."""
        from gpumosaic.placement import kernel

        key = (job.cpu_milli, job.gpu_milli if job.num_gpu else 0, job.num_gpu)
        entries = self._cache.get(key)
        if entries is None:
            n = state.num_nodes
            entries = [_RawCache(np.zeros(n), np.full(n, -1, dtype=np.int64)) for _ in self.members]
            self._cache[key] = entries
        version = state.node_version
        raw = np.empty((len(self.members), len(nodes)))
        for m, (member, entry) in enumerate(zip(self.members, entries, strict=True)):
            stale = nodes[entry.version[nodes] != version[nodes]]
            if len(stale):
                entry.raw[stale] = member.scorer.raw_scores(state, job, stale)
                entry.version[stale] = version[stale]
            raw[m] = entry.raw[nodes]
        total = np.empty(len(nodes))
        cols = np.arange(len(nodes), dtype=np.int64)
        kernel.weighted_total(
            raw, cols, len(nodes), self._weights, self._all_equal, np.empty(len(nodes)), total
        )
        return total

    def node_order(self, state: ClusterState, rng: np.random.Generator) -> npt.NDArray[np.int64]:
        """Position of each node in this run's tie-break permutation."""
        self._bind(state, rng)
        return self._rank

    def _bind(self, state: ClusterState, rng: np.random.Generator) -> None:
        if self._state is state:
            return
        self._state = state
        self._binding += 1
        self._perm = rng.permutation(state.num_nodes)
        self._rank = np.empty(state.num_nodes, dtype=np.int64)
        self._rank[self._perm] = np.arange(state.num_nodes)
        self._pristine, self._classes = _pristine_classes(state, self._kinds)
        self._cache = {}
        self._shapes = {}


def _pristine_classes(
    state: ClusterState, kinds: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], int]:
    """Per node, the class of nodes with equal capacity (GPU model and count, each GPU's
    milli, CPU, memory) if it is untouched now (version 0 and everything free), else -1;
    and the number of classes. Versions only grow, so a node at version 0 later is still
    untouched, and every untouched node of a class scores the same -- unless a member
    reads the node's index (first fit): then no node shares (all -1)."""
    from gpumosaic.placement import kernel

    n = state.num_nodes
    if kernel.FIRSTFIT in kinds.tolist() or n == 0:
        return np.full(n, -1, dtype=np.int64), 0
    spec = np.column_stack(
        [state.node_model, state.num_gpus, state.cpu_capacity, state.memory_capacity,
         state.gpu_capacity],
    ).astype(np.int64)  # fmt: skip
    _, cls = np.unique(spec, axis=0, return_inverse=True)
    untouched = (
        (state.node_version == 0)
        & (state.gpu_free == state.gpu_capacity).all(axis=1)
        & (state.gpu_tasks == 0).all(axis=1)
        & (state.kind_count == 0).all(axis=1)
        & (state.cpu_free == state.cpu_capacity)
        & (state.memory_free == state.memory_capacity)
    )
    pristine = np.where(untouched, cls.reshape(-1), -1).astype(np.int64)
    return pristine, int(cls.max()) + 1


def _place_run() -> Callable[..., int]:
    """``kernel.place_run`` (imported on first use: numba loads with it)."""
    from gpumosaic.placement import kernel

    return kernel.place_run


def _check_new_run(state: ClusterState, jobs: Sequence[JobSpec]) -> None:
    """A run placed in one kernel call must be new jobs, each listed once."""
    ids = {job.id for job in jobs}
    if (
        len(ids) != len(jobs)
        or not state.assignments.keys().isdisjoint(ids)  # iterates over ids
        or not state.gangs.keys().isdisjoint(ids)
    ):
        raise BookkeepingError("a job of the run is listed twice or already placed")


def _adopt_run(
    state: ClusterState,
    jobs: Sequence[JobSpec],
    count: int,
    nodes: npt.NDArray[np.int64],
    gpus: npt.NDArray[np.int64],
) -> list[Assignment]:
    """The assignments of the first ``count`` jobs of a run the kernel allocated on the
    state's arrays, recorded with ``ClusterState.adopt``."""
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
