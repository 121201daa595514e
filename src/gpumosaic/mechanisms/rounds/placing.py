"""The lease book's placements through the placement strategy: the entities of a round
that the symmetric shortcut does not place (other GPU types, fractions of a GPU, pairs,
jobs that may span servers), in the largest-first order the book gives them.

Entities of one shape and type go as a run (one compiled ``KernelRuns`` call, or one
``place_many`` batch for a strategy without a kernel); a job that may span servers goes
alone (one node through the strategy, else a gang); packed pairs' specs are built once
per (pair, type). ``StrategyPlacing`` is the ``LeaseBook``'s part that does this; it
books what it placed in the book's per-row leases and pair leases.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from itertools import pairwise
from typing import NamedTuple

import numpy as np

from gpumosaic.mechanisms.rounds.runs import KernelRuns
from gpumosaic.mechanisms.rounds.shapes import EntityKey, RowShapes, holder_id, pair_spec
from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.base import PlacementStrategy
from gpumosaic.placement.batch import place_run
from gpumosaic.placement.gang import gang_parts
from gpumosaic.types import BoolArray, IntArray


class Lease(NamedTuple):
    """Who holds which GPUs for a round (packed pairs; single jobs' leases are rows)."""

    key: EntityKey
    type_index: int
    holder: int  # the id the ClusterState knows the holder by
    nodes: tuple[int, ...]
    gang: bool


class StrategyPlacing:
    """Placing entities anew through the strategy (``LeaseBook``'s part; it owns the
    attributes below)."""

    state: ClusterState
    strategy: PlacementStrategy
    rng: np.random.Generator
    span_nodes: bool
    n_types: int
    shapes: RowShapes
    kernel_runs: KernelRuns
    pairs: dict[EntityKey, Lease]
    _pair_typed: dict[tuple[EntityKey, int], JobSpec]
    _pair_keys_of_row: dict[int, list[tuple[EntityKey, int]]]
    _held_type: IntArray
    _held_gang: BoolArray
    failures: int
    placements: int

    def _place_rest(
        self,
        fresh: IntArray,
        ra: IntArray,
        rb: IntArray,
        ty: IntArray,
        specs: Sequence[JobSpec],
        got: BoolArray,
    ) -> None:
        """Place the entities at positions ``fresh`` (in that order) through the strategy
        (a run of equal shape and type at a time; a job that may span servers alone)."""
        shapes = self.shapes
        spans = (shapes.num_gpu[ra] > 1) & shapes.may_span[ra] if self.span_nodes else None
        if spans is None or not spans.any():
            self._place_runs(fresh, ra, rb, ty, specs, got)
            return
        # A job that may span servers goes alone (a node, else a gang); the runs between
        # go as batches, in order.
        start = 0
        for i in [*np.flatnonzero(spans).tolist(), len(fresh)]:
            if i > start:
                s = slice(start, i)
                self._place_runs(fresh[s], ra[s], rb[s], ty[s], specs, got)
            if i < len(fresh):
                key, t = (int(ra[i]), int(rb[i])), int(ty[i])
                job = self._typed_one(specs, key, t)
                self._record_one(key, t, self._place_one(job), int(fresh[i]), got)
            start = i + 1

    def _place_runs(
        self,
        positions: IntArray,
        ra: IntArray,
        rb: IntArray,
        ty: IntArray,
        specs: Sequence[JobSpec],
        got: BoolArray,
    ) -> None:
        """Place entities in order (one ``place_many`` batch: the same decisions as one
        ``place`` each), a run of equal shape and type at a time; once a shape and type
        finds no node, later entities of it find none either (resources only shrink)."""
        shapes = self.shapes
        pair = rb >= 0
        shape = shapes.shape[ra]
        if pair.any():
            for i in np.flatnonzero(pair).tolist():
                shape[i] = shapes.shape_id(int(shapes.num_gpu[ra[i]]), MILLI_PER_GPU, 0, 0)
        keys = shape * self.n_types + ty
        bounds = [0, *(np.flatnonzero(np.diff(keys)) + 1).tolist(), len(keys)]
        try:
            self._place_run_list(bounds, keys, positions, ra, rb, ty, pair, specs, got)
        finally:
            self.kernel_runs.record()

    def _place_run_list(
        self,
        bounds: list[int],
        keys: IntArray,
        positions: IntArray,
        ra: IntArray,
        rb: IntArray,
        ty: IntArray,
        pair: BoolArray,
        specs: Sequence[JobSpec],
        got: BoolArray,
    ) -> None:
        """``_place_runs``' runs, ``bounds`` apart; the kernel's holders are recorded by
        the caller (``KernelRuns.record``)."""
        shapes = self.shapes
        failed: set[int] = set()
        for s, e in pairwise(bounds):
            key, t = int(keys[s]), int(ty[s])
            if key in failed:
                self.failures += e - s
                continue
            rows, mixed = ra[s:e], bool(pair[s:e].any())
            if mixed:
                jobs = [
                    self._typed_one(specs, (int(a), int(b)), t)
                    for a, b in zip(ra[s:e], rb[s:e], strict=True)
                ]
            else:
                run = self.kernel_runs.get(key, partial(self._first_typed, specs, rows, t))
                if run is not None:  # a compiled strategy: no object per job
                    n = self.kernel_runs.place(run, rows, e - s)
                    self._count_run(n, e - s, key, failed)
                    if n:
                        got[positions[s : s + n]] = True
                        self._held_type[rows[:n]] = t
                    continue
                jobs = shapes.typed(specs, rows, t)
            placed = place_run(self.strategy, self.state, jobs, self.rng)
            n = len(placed)
            self._count_run(n, e - s, key, failed)
            if not n:
                continue
            got[positions[s : s + n]] = True
            if not mixed:
                self._held_type[rows[:n]] = t
                continue
            for a, b, assignment in zip(
                ra[s : s + n].tolist(), rb[s : s + n].tolist(), placed, strict=True
            ):
                if b < 0:
                    self._held_type[a] = t
                else:
                    key2 = (a, b)
                    self.pairs[key2] = Lease(key2, t, holder_id(key2), (assignment.node,), False)

    def _count_run(self, placed: int, size: int, key: int, failed: set[int]) -> None:
        self.placements += placed
        if placed < size:
            failed.add(key)
            self.failures += size - placed

    def _first_typed(self, specs: Sequence[JobSpec], rows: IntArray, t: int) -> JobSpec:
        return self.shapes.typed(specs, rows[:1], t)[0]

    # ---- one entity at a time (pairs' specs, jobs that may span servers) --------------

    def _typed_one(self, specs: Sequence[JobSpec], key: EntityKey, t: int) -> JobSpec:
        a, b = key
        if b < 0:
            return self.shapes.typed(specs, np.array([a], dtype=np.int64), t)[0]
        job = self._pair_typed.get((key, t))
        if job is None:
            allowed = self.shapes.allowed[t]
            job = replace(pair_spec(specs[a]), id=holder_id(key), allowed_models=allowed)
            self._pair_typed[(key, t)] = job
            for row in key:
                self._pair_keys_of_row.setdefault(row, []).append((key, t))
        return job

    def _place_one(self, job: JobSpec) -> tuple[tuple[int, ...], bool] | None:
        """A multi-GPU job that may span nodes: one node through the strategy, else a gang.
        Returns (nodes, is a gang), None when it found no GPUs."""
        a = self.strategy.place(self.state, job, self.rng)
        if a is not None:
            self.state.allocate(a)
            return (a.node,), False
        parts = gang_parts(self.state, self.strategy, job, self.rng)
        if parts is None:
            return None
        self.state.allocate_gang(parts)
        return tuple(p.node for p in parts), True

    def _record_one(
        self,
        key: EntityKey,
        t: int,
        where: tuple[tuple[int, ...], bool] | None,
        position: int,
        got: BoolArray,
    ) -> None:
        if where is None:
            self.failures += 1
            return
        nodes, gang = where
        self.placements += 1
        got[position] = True
        a, b = key
        if b < 0:
            self._held_type[a] = t
            self._held_gang[a] = gang
        else:
            self.pairs[key] = Lease(key, t, holder_id(key), nodes, gang)
