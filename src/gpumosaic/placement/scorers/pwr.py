"""PWR (power-aware, CCGrid'25): the placement that adds the least power wins.

raw = power before - power after (W, <= 0) with the model of ``model.power``: a GPU with
any allocation draws full power, CPU sockets are active by busy cores. Scores are min-max
normalized to 0..100 over feasible nodes with integer division (all equal -> 100, as
the PWR plugin). A fractional job takes the first GPU that adds least power, i.e. the
lowest-index already busy GPU that fits, else the lowest-index fitting one.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpumosaic.model.job import JobSpec
from gpumosaic.model.power import SOCKET_FULL_W, SOCKET_IDLE_W, gpu_power_table, sockets
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.scorers.base import Nodes, Scorer, Scores, Slots, minmax


class PwrScorer(Scorer):
    name = "pwr"

    def __init__(self) -> None:
        self._state: ClusterState | None = None
        self._gpu_step_w: npt.NDArray[np.float64] = np.zeros(0)
        self._sockets: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)

    def _tables(self, state: ClusterState) -> None:
        if self._state is not state:
            idle, full = gpu_power_table(state)
            self._gpu_step_w = full - idle
            self._sockets = sockets(state.cpu_capacity)
            self._state = state

    def candidate_scores(self, state: ClusterState, job: JobSpec, nodes: Nodes) -> Scores:
        """(K, C) power change (W, <= 0) per candidate GPU choice; -inf where it does not fit."""
        self._tables(state)
        used = state.cpu_capacity[nodes] - state.cpu_free[nodes]
        total = self._sockets[nodes]
        before = np.minimum(sockets(used), total)
        after = np.minimum(sockets(used + job.cpu_milli), total)
        cpu_w = (after - before) * (SOCKET_FULL_W - SOCKET_IDLE_W)
        step = self._gpu_step_w[nodes]
        if job.is_fractional:
            free = state.gpu_free[nodes]
            idle_gpu = free >= state.gpu_capacity[nodes]
            gpu_w = np.where(idle_gpu, step[:, None], 0.0)
            return np.where(free >= job.gpu_milli, -np.trunc(cpu_w[:, None] + gpu_w), -np.inf)
        gpu_w = job.num_gpu * step
        return -np.trunc(cpu_w + gpu_w)[:, None]

    def raw_scores(self, state: ClusterState, job: JobSpec, nodes: Nodes) -> Scores:
        return self.candidate_scores(state, job, nodes).max(axis=1)

    def scores_and_slots(
        self, state: ClusterState, job: JobSpec, nodes: Nodes
    ) -> tuple[Scores, Slots | None]:
        scores = self.candidate_scores(state, job, nodes)
        return scores.max(axis=1), (scores.argmax(axis=1) if job.is_fractional else None)

    def normalize(self, raw: Scores) -> Scores:
        return minmax(raw, all_equal=100.0)

    def fractional_slot(
        self, state: ClusterState, job: JobSpec, node: int, rng: np.random.Generator
    ) -> int:
        scores = self.candidate_scores(state, job, np.array([node], dtype=np.intp))[0]
        return int(np.argmax(scores))
