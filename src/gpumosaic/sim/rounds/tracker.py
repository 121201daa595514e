"""Cluster-wide figures for the round timeline, refreshed once per round for the nodes
whose allocation changed (``ClusterState.node_version`` moved): a round moves several
jobs, and one vectorized pass over the touched nodes is much cheaper than one per change."""

from __future__ import annotations

from typing import cast

import numpy as np

from gpumosaic.model.power import PowerTracker
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.fragmentation import node_fragmentation
from gpumosaic.placement.workload import TargetWorkload

# Node states remembered for the fragmentation (bytes of a key row -> value); cleared
# when it grows past this (openb's 1,213 nodes reach a few thousand states).
_MEMO_LIMIT = 200_000


class RoundTracker:
    def __init__(self, state: ClusterState, workload: TargetWorkload | None) -> None:
        self.state = state
        self.workload = workload
        self._version = state.node_version.copy()
        self.node_fragmentation = (
            node_fragmentation(state, workload) if workload is not None else None
        )
        self.power = PowerTracker(state)
        self.node_free_milli = state.gpu_free.sum(axis=1).astype(np.float64)
        self._memo: dict[bytes, float] = {}

    def refresh(self) -> None:
        """Re-evaluate every node changed since the last refresh."""
        state = self.state
        idx = np.flatnonzero(self._version != state.node_version)
        if len(idx) == 0:
            return
        self._version[idx] = state.node_version[idx]
        if self.node_fragmentation is not None and self.workload is not None:
            self.node_fragmentation[idx] = self._fragmentation(idx)
        self.power.update(idx)
        self.node_free_milli[idx] = state.gpu_free[idx].sum(axis=1)

    def _fragmentation(self, idx: np.ndarray) -> np.ndarray:
        """``node_fragmentation`` of nodes ``idx``, remembered by node state.

        A node's fragmentation is a function of its GPU model, free milli per GPU slot
        and free CPU alone (computed row by row), so a value computed once is exact for
        every node in the same state; a round mechanism moves jobs among few distinct
        node states (Gavel's one-GPU servers: a handful), so most rounds compute nothing.
        """
        state = self.state
        assert self.workload is not None
        key = np.column_stack(
            [state.node_model[idx], state.cpu_free[idx], state.gpu_free[idx]]
        ).astype(np.int64)
        keys = cast(
            list[bytes], key.view(np.dtype((np.void, key.itemsize * key.shape[1]))).ravel().tolist()
        )
        memo = self._memo
        out = np.array([memo.get(k, np.nan) for k in keys])
        miss = np.flatnonzero(np.isnan(out))
        if len(miss):
            values = node_fragmentation(state, self.workload, nodes=idx[miss])
            out[miss] = values
            if len(memo) > _MEMO_LIMIT:
                memo.clear()
            memo.update(zip([keys[i] for i in miss.tolist()], values.tolist(), strict=True))
        return out

    @property
    def allocated_milli(self) -> float:
        return self.state.total_gpu_milli - float(self.node_free_milli.sum())

    @property
    def fragmentation_rate(self) -> float:
        """Cluster fragmentation / free milli; NaN without a target workload."""
        if self.node_fragmentation is None:
            return float("nan")
        free = float(self.node_free_milli.sum())
        return float(self.node_fragmentation.sum()) / free if free > 0 else 0.0

    @property
    def power_w(self) -> tuple[float, float]:
        return self.power.power_w
