"""The event mechanism's scheduling pass, without a clock: ``SchedulingPass``.

It owns the pending queue (jobs waiting for GPUs, in the queue order's key) and, when a
driver calls ``run(state, rng)``, tries them in order and places each one that fits
through the placement strategy, allocating it in ``state``. Strict order stops at the
first job that does not fit (FIFO head-of-line); ``backfill`` lets later jobs that fit go
ahead. A multi-GPU job that may span servers (``JobSpec.may_span_nodes``) and finds no
single server takes GPUs of one model on several servers (a gang), when the driver
allows spanning. The simulator (``mechanisms/event/simulator.py``) calls it after all events
of one instant; a live driver (the Kubernetes extender, a wall-clock service) calls the
same object whenever jobs arrive or GPUs are freed, then starts the jobs it returns.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterator, Sequence
from dataclasses import replace

import numpy as np

from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement.base import PlacementStrategy
from gpumosaic.placement.filter import feasible_among, feasible_shapes_among
from gpumosaic.placement.gang import gang_parts
from gpumosaic.policies.ordering import QueueOrder, SortKey

Shape = tuple[int, int, int, int, frozenset[str] | None, bool]
# Releases remembered for re-try decisions (``SchedulingPass.released``).
RELEASE_LOG_LIMIT = 1 << 16
Parts = tuple[Assignment, ...]  # one part per server (several: a gang)


def job_shape(job: JobSpec) -> Shape:
    """What placement sees of a job: two jobs of one shape fit exactly the same nodes."""
    return (
        job.num_gpu,
        job.gpu_milli,
        job.cpu_milli,
        job.memory_mib,
        job.allowed_models,
        job.may_span_nodes,
    )


class SchedulingPass:
    """Pending jobs grouped by shape, each group sorted by queue key (see ``run``)."""

    def __init__(
        self,
        placement: PlacementStrategy,
        order: QueueOrder,
        backfill: bool,
        span_nodes: bool = True,
    ) -> None:
        """``span_nodes``: whether jobs that may span servers are placed as gangs."""
        self.placement = placement
        self.order = order
        self.backfill = backfill
        self.span_nodes = span_nodes
        self._pending: dict[int, list[tuple[SortKey, int]]] = {}
        self._jobs: dict[int, JobSpec] = {}
        self._shape_ids: dict[Shape, int] = {}
        # Shape -> ``state.releases`` when it last found no node (see ``run``).
        self._blocked: dict[int, int] = {}
        self._blocked_state: ClusterState | None = None
        # The nodes of releases ``_log_base + 1``, ``_log_base + 2``, ... as reported by
        # the driver (``released``); only a log that accounts for every release is read.
        self._release_log: list[int] = []
        self._log_base = 0

    def __len__(self) -> int:
        return len(self._jobs)

    def add(self, job: JobSpec, shape: Shape | None = None) -> None:
        """Queue an arrived job (its id must be new); ``shape``: ``job_shape(job)`` when
        the caller has it already."""
        key = job_shape(job) if shape is None else shape
        shape_id = self._shape_ids.setdefault(key, len(self._shape_ids))
        bisect.insort(self._pending.setdefault(shape_id, []), (self.order.key(job), job.id))
        self._jobs[job.id] = job

    def pending(self) -> Iterator[JobSpec]:
        """The jobs still waiting (any order)."""
        return iter(self._jobs.values())

    def released(self, state: ClusterState, nodes: Sequence[int]) -> None:
        """Tell the pass that ``state.release`` just freed resources on ``nodes``, one
        node per release since the last report, in order (a gang: one per part). Optional:
        without these reports, or when one is missed, the pass re-tries every waiting shape
        after any release."""
        if self._blocked_state is not state:
            self._blocked_state, self._blocked = state, {}
            self._release_log, self._log_base = [], state.releases
            return
        if state.releases != self._log_base + len(self._release_log) + len(nodes):
            self._release_log, self._log_base = [], state.releases  # a release went unreported
            return
        self._release_log.extend(nodes)
        if len(self._release_log) > RELEASE_LOG_LIMIT:  # a long-lived driver: forget the
            half = len(self._release_log) // 2  # oldest half (shapes blocked that long
            del self._release_log[:half]  # ago are simply re-tried)
            self._log_base += half

    def run(self, state: ClusterState, rng: np.random.Generator) -> list[tuple[JobSpec, Parts]]:
        """Place pending jobs in queue order; returns (job, parts) of those started, in
        the order they were placed (each already allocated in ``state``; a gang's parts
        with ``state.allocate_gang``).

        Free resources only shrink until the next release, so once a job of some shape
        finds no node, no job of that shape will before something is released: the pass
        merges the per-shape queues by key, drops a shape at its first failure, and does
        not re-try a shape that failed in an earlier pass when ``state.releases`` has not
        moved since (a replay that queues re-scored every waiting shape at every event).
        When releases were reported (``released``), a shape is re-tried only if one of
        the nodes released since its failure could hold it now (the filter's test on
        those nodes alone: every other node only lost resources since); that test is made
        for every waiting shape in one vectorized call as the pass starts, and again on
        the nodes the pass placed on (``_Retest``). Without backfill the first failure
        ends the pass (strict FIFO)."""
        if not self._pending:
            return []
        if self._blocked_state is not state:  # another cluster: nothing known about it
            self._blocked_state, self._blocked = state, {}
            self._release_log, self._log_base = [], state.releases
        releases, blocked = state.releases, self._blocked
        log_covers = self._log_base + len(self._release_log) == releases
        # The waiting shapes' re-try test, for all of them at once (see ``_Retest``).
        retest = self._retest(state, releases) if log_covers and blocked else None
        heads = [(group[0][0], shape_id) for shape_id, group in self._pending.items()]
        heapq.heapify(heads)
        taken: dict[int, int] = {}
        started: list[tuple[JobSpec, Parts]] = []
        while heads:
            _, shape_id = heapq.heappop(heads)
            group = self._pending[shape_id]
            index = taken.get(shape_id, 0)
            job = self._jobs[group[index][1]]
            parts: Parts | None = None
            # A shape that found no node (nor a gang) and nothing was released since:
            # still none. (A gang attempt that placed pieces released them again, which
            # moves ``state.releases``: a skip never replaces an attempt that drew on rng.)
            failed_at = blocked.get(shape_id)
            if failed_at != releases and not (
                log_covers
                and failed_at is not None
                and (
                    retest.still_blocked(state, shape_id)
                    if retest is not None and shape_id in retest.fitting
                    else self._still_blocked(state, job, failed_at)
                )
            ):
                assignment = self.placement.place(state, job, rng)
                if assignment is not None:
                    state.allocate(assignment)
                    parts = (assignment,)
                elif self.span_nodes and job.may_span_nodes and job.num_gpu > 1:
                    parts = self._gang(state, job, rng)
            if parts is None:
                blocked[shape_id] = releases
                if not self.backfill:
                    break
                continue
            started.append((job, parts))
            if retest is not None:
                retest.placed.extend(part.node for part in parts)
            taken[shape_id] = index + 1
            if index + 1 < len(group):
                heapq.heappush(heads, (group[index + 1][0], shape_id))
        for shape_id, count in taken.items():
            group = self._pending[shape_id]
            for _, job_id in group[:count]:
                del self._jobs[job_id]
            if count == len(group):
                del self._pending[shape_id]
            else:
                del group[:count]
        return started

    def _retest(self, state: ClusterState, releases: int) -> _Retest | None:
        """``_Retest`` of every waiting shape ``_still_blocked`` would test now: the
        filter over those shapes and the nodes released since the oldest failure among
        them, in one vectorized call (a node counts for a shape from its failure on)."""
        base = self._log_base
        shapes: list[int] = []
        jobs: list[JobSpec] = []
        starts: list[int] = []
        for shape_id, failed_at in self._blocked.items():
            group = self._pending.get(shape_id)
            if group is None or failed_at == releases or failed_at < base:
                continue
            job = self._jobs[group[0][1]]
            if self.span_nodes and job.may_span_nodes and job.num_gpu > 1:
                continue  # always re-tried
            shapes.append(shape_id)
            jobs.append(job)
            starts.append(failed_at - base)
        if not shapes:
            return None
        first = min(starts)
        nodes = np.array(self._release_log[first:], dtype=np.intp)
        fits = feasible_shapes_among(state, jobs, nodes)
        fits &= np.arange(first, first + len(nodes))[None, :] >= np.array(starts)[:, None]
        fitting = {s: set(nodes[fits[k]].tolist()) for k, s in enumerate(shapes)}
        return _Retest(dict(zip(shapes, jobs, strict=True)), fitting)

    def _still_blocked(self, state: ClusterState, job: JobSpec, failed_at: int) -> bool:
        """Whether ``job``'s shape, which found no node when ``state.releases`` was
        ``failed_at``, still finds none: no node released since could hold it now. Jobs
        that may be placed as gangs are always re-tried (whole GPUs on several nodes)."""
        if failed_at < self._log_base or (
            self.span_nodes and job.may_span_nodes and job.num_gpu > 1
        ):
            return False
        nodes = np.array(self._release_log[failed_at - self._log_base :], dtype=np.intp)
        return not feasible_among(state, job, nodes).any()

    def _gang(self, state: ClusterState, job: JobSpec, rng: np.random.Generator) -> Parts | None:
        """GPUs of one model (the cluster's order) on several servers, all or nothing."""
        # Whole free GPUs per model: a cheap necessary condition before asking the
        # strategy GPU by GPU (most failed attempts stop here).
        whole = ((state.gpu_free == MILLI_PER_GPU) & state.gpu_exists).sum(axis=1)
        free_by_model = np.bincount(
            state.node_model, weights=whole, minlength=len(state.model_names)
        )
        for t, name in enumerate(state.model_names):
            if not job.allows(name) or free_by_model[t] < job.num_gpu:
                continue
            typed = replace(job, allowed_models=frozenset({name.upper()}))
            parts = gang_parts(state, self.placement, typed, rng)
            if parts is not None:
                state.allocate_gang(parts)
                return parts
        return None


class _Retest:
    """The waiting shapes of one pass that ``_still_blocked`` would test, and for each the
    nodes released since its failure that could hold it, as of the start of the pass.

    Within a pass free resources only shrink (allocations; a failed gang attempt gives
    its pieces back), so a shape with no such node is still blocked at its turn, and one
    whose nodes the pass has not placed on since still fits. The nodes the pass placed
    on (``placed``) are tested again, for every waiting shape in one vectorized call,
    before the next answer that depends on them: the answers are ``_still_blocked``'s."""

    def __init__(self, jobs: dict[int, JobSpec], fitting: dict[int, set[int]]) -> None:
        self.jobs = jobs
        self.fitting = fitting
        self.placed: list[int] = []
        self._seen = 0  # how many of ``placed`` were tested again

    def still_blocked(self, state: ClusterState, shape_id: int) -> bool:
        if len(self.placed) > self._seen:
            self._drop_lost(state, set(self.placed[self._seen :]))
            self._seen = len(self.placed)
        return not self.fitting[shape_id]

    def _drop_lost(self, state: ClusterState, placed: set[int]) -> None:
        shapes = [s for s, nodes in self.fitting.items() if not nodes.isdisjoint(placed)]
        if not shapes:
            return
        nodes = np.array(sorted(placed), dtype=np.intp)
        fits = feasible_shapes_among(state, [self.jobs[s] for s in shapes], nodes)
        for k, shape_id in enumerate(shapes):
            self.fitting[shape_id].difference_update(nodes[~fits[k]].tolist())
