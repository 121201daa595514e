"""One placement strategy's answer when kube-scheduler holds the last word.

The strategy decides exactly as in ``fill`` and ``simulate``: ``place(state, job, rng)``
over the whole cluster, with its own tie-break order. kube-scheduler then asks for scores
of the nodes that passed its in-tree filters, on a 0..10 scale that cannot carry FGD's
0..100 (FGD's coarse ties matter, DESIGN.md). So the strategy's chosen node gets 10, the
top of the scale, and every other candidate gets the strategy's own total score min-max
mapped onto 0..9: with the profile of ``deploy/`` (extender scores only) kube-scheduler's
argmax is the strategy's choice, and with in-tree scorers on as well the order of the
others is still the strategy's.

When kube-scheduler's candidates do not include the strategy's node (its in-tree filters
removed it), the best candidate by the strategy's scores and tie-break order wins (a
random one for strategies without scores): a counted fallback, never silent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from gpumosaic.apps.extender.wire import MAX_EXTENDER_PRIORITY
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement.base import PlacementStrategy
from gpumosaic.placement.filter import feasible_nodes
from gpumosaic.placement.gpu_choice import best_fit_gpu, node_gpus
from gpumosaic.placement.scorers.base import Scorer
from gpumosaic.placement.workload import TargetWorkload

Nodes = npt.NDArray[np.intp]


@runtime_checkable
class NodeScoring(Protocol):
    """A strategy that exposes its totals and tie-break order (ScoredPlacement does)."""

    def scores(
        self, state: ClusterState, job: JobSpec, nodes: Nodes
    ) -> npt.NDArray[np.float64]: ...

    def node_order(
        self, state: ClusterState, rng: np.random.Generator
    ) -> npt.NDArray[np.int64]: ...


@runtime_checkable
class ChoosesGpus(Protocol):
    """A strategy whose GPU choice inside a node is a scorer's (ScoredPlacement)."""

    gpu_chooser: Scorer


@dataclass(frozen=True, slots=True)
class Decision:
    """The node and GPUs for a pod, and the 0..10 score of every candidate node."""

    assignment: Assignment | None
    candidates: Nodes
    scores: npt.NDArray[np.int64]  # aligned with ``candidates``, 0..10
    fallback: bool  # kube-scheduler's candidates lacked the strategy's own choice

    def score_of(self, num_nodes: int) -> npt.NDArray[np.int64]:
        """Scores indexed by node (0 for nodes that are not candidates)."""
        out = np.zeros(num_nodes, dtype=np.int64)
        out[self.candidates] = self.scores
        return out


def bind_strategy(
    strategy: PlacementStrategy, state: ClusterState, rng: np.random.Generator
) -> None:
    """Draw the strategy's tie-break order now, as ``fill``'s first ``place`` call does,
    so that a run of the extender and a fill with the same rng agree node for node."""
    if isinstance(strategy, NodeScoring):
        strategy.node_order(state, rng)


def warm_scores(strategy: PlacementStrategy, state: ClusterState, workload: TargetWorkload) -> None:
    """Score every node once for each class of the target workload, at start: the first
    pod of a shape would otherwise pay for scoring the whole cluster (~10-15 ms at openb
    scale) inside kube-scheduler's timeout. Scores are cached per node and refreshed only
    where a node changed, so this changes no decision."""
    if not isinstance(strategy, NodeScoring):
        return
    everywhere = np.arange(state.num_nodes, dtype=np.intp)
    for c in workload.classes:
        job = JobSpec(
            id=-1, arrival_s=0.0, job_type="warm-up", num_gpu=c.num_gpu,
            gpu_milli=c.gpu_milli if c.num_gpu else 1000, work=0.0, cpu_milli=c.cpu_milli,
            allowed_models=c.allowed_models,
        )  # fmt: skip
        nodes = everywhere[feasible_nodes(state, job)]
        if len(nodes):
            strategy.scores(state, job, nodes)


def gpu_assignment(
    strategy: PlacementStrategy,
    state: ClusterState,
    job: JobSpec,
    node: int,
    rng: np.random.Generator,
) -> tuple[Assignment, bool]:
    """The GPUs ``job`` takes on ``node`` by the strategy's rule; (assignment, fallback),
    fallback True when the strategy has no per-node rule and best fit was used."""
    if isinstance(strategy, ChoosesGpus):
        return strategy.gpu_chooser.assignment(state, job, node, rng), False
    slot = best_fit_gpu(state.gpu_free[node], job.gpu_milli) if job.is_fractional else -1
    gpus = node_gpus(state, job, node, slot)
    milli = job.gpu_milli if job.num_gpu else 0
    return Assignment(job.id, node, gpus, milli, job.cpu_milli, job.memory_mib), True


def decide(
    strategy: PlacementStrategy,
    state: ClusterState,
    job: JobSpec,
    candidates: Nodes,
    rng: np.random.Generator,
) -> Decision:
    """The strategy's decision restricted to ``candidates`` (feasible node indices)."""
    if not len(candidates):
        return Decision(None, candidates, np.zeros(0, dtype=np.int64), False)
    choice = strategy.place(state, job, rng)
    totals = strategy.scores(state, job, candidates) if isinstance(strategy, NodeScoring) else None
    fallback = choice is None or not bool(np.any(candidates == choice.node))
    if fallback:
        if totals is not None and isinstance(strategy, NodeScoring):
            rank = strategy.node_order(state, rng)[candidates]
            best = np.flatnonzero(totals == totals.max())
            node = int(candidates[best[np.argmin(rank[best])]])
        else:
            node = int(candidates[rng.integers(len(candidates))])
        choice, _ = gpu_assignment(strategy, state, job, node, rng)
    assert choice is not None
    top = MAX_EXTENDER_PRIORITY
    if totals is not None:
        lo, hi = float(totals.min()), float(totals.max())
        if hi > lo:
            scores = np.floor((top - 1) * (totals - lo) / (hi - lo)).astype(np.int64)
        else:
            scores = np.full(len(totals), top - 1, dtype=np.int64)
    else:
        scores = np.zeros(len(candidates), dtype=np.int64)
    scores[candidates == choice.node] = top
    return Decision(choice, candidates, scores, fallback)
