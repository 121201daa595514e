"""The filter (compiled, ``kernel.step.fits``) against its numpy definition, on a cluster
after random allocations, for every shape, model constraint and an absurd request."""

from __future__ import annotations

import numpy as np
from placement_builders import cluster, job, occupy

from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.filter import feasible_among, feasible_nodes


def _definition(state: ClusterState, j: JobSpec) -> np.ndarray:
    ok = (state.cpu_free >= j.cpu_milli) & (state.memory_free >= j.memory_mib)
    if j.num_gpu == 0:
        return ok
    ok &= state.model_mask(j.allowed_models)
    return ok & ((state.gpu_free >= j.gpu_milli).sum(axis=1) >= j.num_gpu)


def test_filter_equals_its_definition() -> None:
    state = cluster(*[("T4", 2, 32_000), ("V100", 4, 64_000), ("A100", 8, 96_000)] * 4)
    rng = np.random.default_rng(2)
    for _ in range(40):
        node = int(rng.integers(state.num_nodes))
        gpus = np.flatnonzero(state.gpu_free[node] >= 300)[:1]
        if len(gpus) and state.cpu_free[node] >= 4_000:
            occupy(state, node, (int(gpus[0]),), 300, cpu=4_000)
    jobs = [
        job(1, 500, cpu=2_000), job(1, 800, models="v100|a100"), job(2), job(4, cpu=60_000),
        job(0, cpu=30_000), job(1, 250, models="k80"), job(1, cpu=10**30),
    ]  # fmt: skip
    some = np.array([0, 3, 5, 11], dtype=np.intp)
    for j in jobs:
        want = _definition(state, j)
        assert np.array_equal(feasible_nodes(state, j), want)
        assert np.array_equal(feasible_among(state, j, some), want[some])
    assert not feasible_nodes(state, job(1, cpu=10**30)).any()  # beyond int64: fits nowhere
