"""The fill replay's road: ``fill_replay(nodes, tasks, placement, seed, inflate)`` builds the
placement strategy (against the task list's target workload) and the run's Generator from
``seed``, then runs ``sim.fill.run_fill`` with those objects. ``gpumosaic fill``,
``compare --mode fill``, fill studies, the extender's ``--compare-fill`` and the kernel
build all call it. Light to import (no policies, no event simulator)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from gpumosaic.mechanisms.fill.simulator import FillResult, run_fill
from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import Assignment
from gpumosaic.placement.workload import TargetWorkload
from gpumosaic.run.parts import build_placement_for


def fill_replay(
    nodes: ClusterSpec,
    tasks: Sequence[JobSpec],
    placement: str,
    seed: int,
    inflate: float = 1.3,
    progress: Callable[[float], None] | None = None,
    on_task: Callable[[int, JobSpec, Assignment | None], None] | None = None,
) -> FillResult:
    """One fill replay of ``tasks`` on ``nodes`` with the placement named ``placement``."""
    target = TargetWorkload.from_jobs(tasks)
    strategy = build_placement_for(placement, target)
    rng = np.random.default_rng(seed)
    return run_fill(nodes, tasks, strategy, target, rng, seed, inflate, progress, on_task)
