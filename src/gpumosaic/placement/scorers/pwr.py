"""PWR (power-aware, CCGrid'25): the placement that adds the least power wins.

raw = power before - power after (W, <= 0) with the model of ``model.power``: a GPU with
any allocation draws full power, CPU sockets are active by busy cores. Scores are min-max
normalized to 0..100 over feasible nodes with integer division (all equal -> 100, as
the PWR plugin). A fractional job takes the first GPU that adds least power, i.e. the
lowest-index already busy GPU that fits, else the lowest-index fitting one. The
arithmetic is compiled (``placement.kernel.scores.pwr_node``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import numpy.typing as npt

from gpumosaic.model.job import JobSpec
from gpumosaic.model.power import gpu_power_table, sockets
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.scorers.base import KernelInputs, Scorer


class PwrScorer(Scorer):
    name = "pwr"
    kernel_kind = 6  # kernel.PWR
    all_equal = 100.0

    def __init__(self) -> None:
        self._state: ClusterState | None = None
        self._gpu_step_w: npt.NDArray[np.float64] = np.zeros(0)
        self._sockets: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)

    def kernel_inputs(self, state: ClusterState, job: JobSpec, into: KernelInputs) -> KernelInputs:
        if self._state is not state:  # per-node constants of the cluster
            idle, full = gpu_power_table(state)
            self._gpu_step_w = full - idle
            self._sockets = sockets(state.cpu_capacity)
            self._state = state
        return replace(into, gpu_step_w=self._gpu_step_w, sockets=self._sockets)
