"""The placement contract shared by the simulator and the live extender."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import Assignment, ClusterState


class PlacementStrategy(Protocol):
    """Where to put one job: filter -> score all nodes -> pick the node's GPUs.

    ``place`` returns ``None`` when no node passes the filter; the caller asks
    ``placement.filter.explain`` for the reason. It never mutates ``state``: the caller
    applies the assignment with ``state.allocate``.
    """

    name: str

    def place(
        self, state: ClusterState, job: JobSpec, rng: np.random.Generator
    ) -> Assignment | None: ...

    def choose(
        self, state: ClusterState, job: JobSpec, rng: np.random.Generator
    ) -> tuple[int, tuple[int, ...]] | None:
        """``place`` without building the Assignment: (node, GPU slots) or None. For
        callers that hold the job under another id (a fill replay's sampled copies)."""
        ...
