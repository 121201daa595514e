"""The lease book's compiled runs: per (shape, GPU type) the placement kernel's call, kept
for the run, and the holders a batch of calls placed, recorded once per GPU count.

A round places ~20 runs of equal shape and type; building the typed spec, the filter key
and the kernel's arguments for each, and recording each run's holders with its own
``adopt_rows``, cost more than the placements. ``KernelRuns`` keeps the strategy's
``ShapeRun`` per key (used while the strategy keeps that binding) and collects what the
calls placed until ``record``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.base import PlacementStrategy
from gpumosaic.placement.scorers.combined import ScoredPlacement, ShapeRun
from gpumosaic.types import IntArray


class KernelRun(NamedTuple):
    """A shape and type's compiled run and what each of its jobs holds."""

    shape: ShapeRun
    milli: int
    cpu: int
    memory: int


class _Placed(NamedTuple):
    """Jobs one kernel call placed, to record as holders."""

    rows: IntArray
    nodes: IntArray
    gpus: IntArray
    milli: int
    cpu: int
    memory: int


class KernelRuns:
    """The compiled runs of one lease book (its state, strategy and rng)."""

    def __init__(
        self, state: ClusterState, strategy: PlacementStrategy, rng: np.random.Generator
    ) -> None:
        self.state = state
        self.strategy = strategy
        self.rng = rng
        self._runs: dict[int, KernelRun | None] = {}
        self._placed: dict[int, list[_Placed]] = {}  # by GPU slots per job

    def get(self, key: int, first_job: Callable[[], JobSpec]) -> KernelRun | None:
        """The compiled run of ``key`` (a shape and type; ``first_job()`` builds the spec
        of one of its jobs when the run is new): None when the strategy has none."""
        strategy = self.strategy
        if key in self._runs:
            found = self._runs[key]
            if found is None:
                return None
            if isinstance(strategy, ScoredPlacement) and strategy.current(found.shape):
                return found
        run = None
        if isinstance(strategy, ScoredPlacement):
            job = first_job()
            run = KernelRun(
                strategy.shape_run(self.state, job, self.rng),
                job.gpu_milli if job.num_gpu else 0,
                job.cpu_milli,
                job.memory_mib,
            )
        self._runs[key] = run
        return run

    def place(self, run: KernelRun, rows: IntArray, count: int) -> int:
        """Place up to ``count`` jobs ``rows`` of one shape in one kernel call (it takes
        their resources; ``record`` records the holders). Returns how many found a node."""
        shape = run.shape
        taken = shape.taken
        nodes = np.empty(count, dtype=np.int64)
        gpus = np.empty((count, max(taken, 1)), dtype=np.int64)
        n = int(shape.run(count, True, *shape.args, nodes, gpus))
        if n:
            self._placed.setdefault(taken, []).append(
                _Placed(rows[:n], nodes[:n], gpus[:n, :taken], run.milli, run.cpu, run.memory)
            )
        return n

    def record(self) -> None:
        """Record the holders placed since the last call, one ``adopt_rows`` per GPU count."""
        for parts in self._placed.values():
            if len(parts) == 1:
                a = parts[0]
                self.state.adopt_rows(a.rows, a.nodes, a.gpus, a.milli, a.cpu, a.memory)
                continue
            sizes = [len(a.rows) for a in parts]
            self.state.adopt_rows(
                np.concatenate([a.rows for a in parts]),
                np.concatenate([a.nodes for a in parts]),
                np.concatenate([a.gpus for a in parts]),
                np.repeat(np.array([a.milli for a in parts], dtype=np.int64), sizes),
                np.repeat(np.array([a.cpu for a in parts], dtype=np.int64), sizes),
                np.repeat(np.array([a.memory for a in parts], dtype=np.int64), sizes),
            )
        self._placed.clear()
