"""FGD's compiled score (placement/kernel/fgd.py) against its definition: every
candidate's score equals F of the node after the hypothetical placement minus F before,
computed from scratch with ``node_fragmentation`` on a copy of the cluster.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from placement_builders import all_nodes, cluster, job, occupy, workload

from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement.fragmentation import node_fragmentation
from gpumosaic.placement.scorers import FgdScorer

WL = workload(
    (1, 500, 2_000, 0.37), (1, 330, 4_000, 0.29), (2, 1000, 8_000, 0.21), (0, 0, 1_000, 0.13)
)


def _definition_scores(state: ClusterState, j, exact: bool) -> np.ndarray:
    """FGD's score of every candidate from scratch: F of the node after the placement
    minus F before, with the reference measure (no tracker, no tables)."""
    before = node_fragmentation(state, WL)
    out = np.full((state.num_nodes, state.gpu_free.shape[1] if j.is_fractional else 1), -np.inf)
    for n in range(state.num_nodes):
        free = state.gpu_free[n]
        if j.is_fractional:
            candidates = [(g,) for g in range(len(free)) if free[g] >= j.gpu_milli]
        else:
            whole = [g for g in range(len(free)) if free[g] >= 1000][: j.num_gpu]
            candidates = [tuple(whole)] if len(whole) == j.num_gpu else []
        for gpus in candidates:
            after_state = copy.deepcopy(state)
            after_state.allocate(
                Assignment(-1, n, gpus, j.gpu_milli if j.num_gpu else 0, j.cpu_milli, 0)
            )
            delta = node_fragmentation(after_state, WL)[n] - before[n]
            score = 100 / (1 + np.exp(delta / 1000))
            out[n, gpus[0] if j.is_fractional else 0] = score if exact else np.trunc(score)
    return out


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize(
    "shape", [(1, 250, 1_000), (1, 500, 2_000), (1, 1000, 4_000), (2, 1000, 8_000), (0, 0, 3_000)]
)
def test_fgd_kernel_scores_equal_the_definition(shape: tuple[int, int, int], exact: bool) -> None:
    state = cluster(("T4", 2, 32_000), ("V100", 4, 64_000), ("A100", 8, 96_000))
    occupy(state, 0, (0,), 700, cpu=2_000)
    occupy(state, 1, (1,), 330, cpu=8_000)
    occupy(state, 1, (2,), 500)
    occupy(state, 2, (0, 1, 2), 1000, cpu=30_000)
    occupy(state, 2, (5,), 170)
    j = job(*shape)
    scorer = FgdScorer(WL, exact=exact)
    got = scorer.candidate_scores(state, j, all_nodes(state))
    want = _definition_scores(state, j, exact)
    fits = np.isfinite(want)  # nodes that cannot hold a whole-GPU job are never scored
    if j.is_fractional:  # -inf exactly on the GPUs that do not fit
        assert np.array_equal(np.isfinite(got), fits)
    if exact:
        np.testing.assert_allclose(got[fits], want[fits], rtol=1e-12)
    else:
        assert np.array_equal(got[fits], want[fits])
