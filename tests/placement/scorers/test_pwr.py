"""PWR on a hand-made node set; the arithmetic of each score is in a comment."""

from __future__ import annotations

import numpy as np
from placement_builders import all_nodes, cluster, job, occupy

from gpumosaic.placement.scorers import PwrScorer

RNG = np.random.default_rng(0)


def test_pwr_power_delta_normalized_and_gpu_choice() -> None:
    # T4 2 GPUs (10/70 W), 32 vCPU = 16 cores = 1 socket; V100M16 4 GPUs (30/300 W),
    # 64 vCPU = 32 cores = 2 sockets. Sockets: 15 W idle, 120 W active.
    state = cluster(("T4", 2, 32_000), ("V100M16", 4, 64_000), ("V100M16", 4, 64_000))
    occupy(state, 1, (2,), 300, cpu=2_000)  # n1: GPU 2 busy, one socket active
    j = job(1, 500, cpu=4_000)
    scorer = PwrScorer()
    # n0: socket 0 -> 1 active: +105; an idle T4 turns busy: +60 -> raw -165
    # n1: 2000 -> 6000 milli-CPU, still 1 socket; busy GPU 2 fits 500 -> raw 0
    # n2: +105 socket, +270 idle V100 turns busy -> raw -375
    raw = scorer.raw_scores(state, j, all_nodes(state))
    assert raw.tolist() == [-165, 0, -375]
    # min-max: (-165 + 375) * 100 // 375 = 56, 100, 0
    assert scorer.normalize(raw).tolist() == [56, 100, 0]
    assert scorer.normalize(np.array([-5.0, -5.0])).tolist() == [100, 100]
    assert scorer.assignment(state, j, 1, RNG).gpus == (2,)  # the busy GPU adds no power
    assert scorer.assignment(state, j, 2, RNG).gpus == (0,)  # none busy: first that fits
