"""Random on a hand-made node set: the node is the i-th feasible one in node order, i
drawn by ``rng.integers(feasible)``; a fractional job's GPU the j-th fitting one, j drawn
by ``rng.integers(fitting)`` next (kernel/test_kernel_step.py checks long runs)."""

from __future__ import annotations

import numpy as np
from placement_builders import cluster, job, occupy

from gpumosaic.placement.scorers import RandomPlacement


def test_random_draws_node_then_gpu_from_the_generator() -> None:
    state = cluster(("T4", 2, 8_000), ("T4", 4, 64_000), ("T4", 2, 64_000), ("T4", 4, 64_000))
    occupy(state, 1, (0,), 800)  # n1 free [200, 1000, 1000, 1000]
    occupy(state, 3, (0, 1, 2), 700)  # n3 free [300, 300, 300, 1000]
    j = job(1, 500, cpu=16_000)  # n0 lacks CPU: feasible n1, n2, n3
    draws = np.random.default_rng(21)
    i = int(draws.integers(3))
    node = [1, 2, 3][i]
    fitting = {1: [1, 2, 3], 2: [0, 1], 3: [3]}[node]
    gpu = fitting[int(draws.integers(len(fitting)))]
    got = RandomPlacement().choose(state, j, np.random.default_rng(21))
    assert got == (node, (gpu,))
    # a whole-GPU job takes the lowest fully free GPUs of the drawn node, one draw only
    k = int(np.random.default_rng(4).integers(3))
    whole = RandomPlacement().choose(state, job(1, cpu=16_000), np.random.default_rng(4))
    assert whole == ([1, 2, 3][k], ((1,), (0,), (3,))[k])
    assert RandomPlacement().choose(state, job(4), np.random.default_rng(0)) is None
