"""ScoredPlacement: filter -> weighted sum of scorers -> best node -> GPUs.

One class serves every scored strategy: a single scorer is a combination of one member
(weight 1000, as the reference configures single plugins).

Speed: raw scores are node-local, so they are cached per job shape (cpu, gpu_milli,
num_gpu) and node, stamped with the node's ``node_version``; a decision recomputes only
the feasible nodes whose state changed since that shape was last scored. A fill replay
changes one node per task and the openb trace has ~90 shapes, so almost every score comes
from the cache. Normalization and the weighted sum run over all feasible nodes each time.

Ties: the highest total wins; among equal totals the node that comes first in a random
permutation of the nodes wins. The permutation is drawn from the ``rng`` of the first
``place`` call on a given ClusterState and kept for every later call on that state: one
fixed node order per run, as the reference shuffles node names once per run with its seed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement.filter import feasible_nodes
from gpumosaic.placement.scorers.base import Nodes, Scorer, Scores

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


class ScoredPlacement:
    """A PlacementStrategy built from weighted scorers; the GPU choice inside the chosen
    node is the one of the highest-weight member (the first one on equal weights)."""

    def __init__(self, name: str, members: tuple[Member, ...]) -> None:
        if not members:
            raise ValueError("a scored placement needs at least one scorer")
        self.name = name
        self.members = members
        self.gpu_chooser = max(members, key=lambda m: m.weight).scorer
        self._state: ClusterState | None = None
        self._rank: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._cache: dict[ShapeKey, list[_RawCache]] = {}

    def place(
        self, state: ClusterState, job: JobSpec, rng: np.random.Generator
    ) -> Assignment | None:
        self._bind(state, rng)
        nodes = np.flatnonzero(feasible_nodes(state, job))
        if not len(nodes):
            return None
        total = self.scores(state, job, nodes)
        best = nodes[total == total.max()]
        node = int(best[np.argmin(self._rank[best])]) if len(best) > 1 else int(best[0])
        return self.gpu_chooser.assignment(state, job, node, rng)

    def scores(self, state: ClusterState, job: JobSpec, nodes: Nodes) -> Scores:
        """Weighted sum of normalized member scores for the feasible ``nodes``."""
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
        perm = rng.permutation(state.num_nodes)
        self._rank = np.empty(state.num_nodes, dtype=np.int64)
        self._rank[perm] = np.arange(state.num_nodes)
        self._cache = {}
