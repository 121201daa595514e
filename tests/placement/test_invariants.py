"""Property: any sequence of tasks placed by any strategy keeps the bookkeeping valid."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from placement_builders import cluster, job, workload

from gpumosaic.placement.registry import build_placement
from gpumosaic.placement.workload import TargetWorkload

STRATEGIES = (
    "random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd", "fgd-exact",
    "pwr", "firstfit", "worstfit", "pwr=200,fgd=800",
)  # fmt: skip

tasks = st.lists(
    st.tuples(
        st.sampled_from([0, 1, 1, 1, 2, 4]),  # GPUs
        st.integers(1, 1000),  # milli for 1-GPU tasks
        st.integers(0, 40_000),  # CPU
        st.sampled_from([None, "T4", "G2|V100M16"]),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(STRATEGIES), specs=tasks, seed=st.integers(0, 2**32 - 1))
def test_placements_never_break_invariants(
    name: str, specs: list[tuple[int, int, int, str | None]], seed: int
) -> None:
    state = cluster(("T4", 2, 32_000), ("G2", 8, 96_000), ("V100M16", 4, 32_000))
    jobs = [job(n, milli if n == 1 else 1000, cpu, models) for n, milli, cpu, models in specs]
    wl = TargetWorkload.from_jobs(jobs) if jobs else workload((1, 500, 0, 1.0))
    strategy = build_placement(name, wl)
    rng = np.random.default_rng(seed)
    for j in jobs:
        a = strategy.place(state, j, rng)
        if a is None:
            continue
        assert a.node in range(state.num_nodes) and len(a.gpus) == j.num_gpu
        state.allocate(a)  # raises BookkeepingError on any over-commit
        state.check_invariants()
