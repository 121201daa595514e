"""FGD on hand-made node sets; the arithmetic of each score is in a comment."""

from __future__ import annotations

import numpy as np
import pytest
from placement_builders import all_nodes, cluster, job, occupy, workload

from gpumosaic.placement.scorers import FgdScorer

RNG = np.random.default_rng(0)


def test_fgd_fractional_tries_every_gpu() -> None:
    # M = one class, 1 whole GPU, p = 1: free milli on GPUs below 1000 is stranded.
    scorer = FgdScorer(workload((1, 1000, 0, 1.0)))
    state = cluster(("T4", 2, 64_000), ("T4", 2, 64_000))
    occupy(state, 0, (1,), 400)  # n0 free [1000, 600]: F = 600
    j = job(1, 300)
    # n0, GPU 0 -> [700, 600]: nothing fits a whole GPU, F = 1300, Delta = 700,
    #     100 * sigmoid(-0.7) = 33.18 -> 33
    # n0, GPU 1 -> [1000, 300]: F = 300, Delta = -300, 100 * sigmoid(0.3) = 57.44 -> 57 (best)
    # n1, either GPU -> [700, 1000]: F = 700, Delta = 700 -> 33
    cand = scorer.candidate_scores(state, j, all_nodes(state))
    assert cand.tolist() == [[33, 57], [33, 33]]
    assert scorer.raw_scores(state, j, all_nodes(state)).tolist() == [57, 33]
    assert scorer.assignment(state, j, 0, RNG).gpus == (1,)
    assert scorer.assignment(state, j, 1, RNG).gpus == (0,)  # tie -> first GPU
    exact = FgdScorer(workload((1, 1000, 0, 1.0)), exact=True)
    assert exact.raw_scores(state, j, all_nodes(state))[0] == pytest.approx(
        100 / (1 + np.exp(-0.3))
    )


def test_fgd_whole_gpu_and_cpu_only() -> None:
    # M = one class: 1 x 500 milli with 4000 milli-CPU.
    scorer = FgdScorer(workload((1, 500, 4_000, 1.0)))
    state = cluster(("T4", 2, 8_000))
    # whole GPU: [1000, 1000] -> [0, 1000], still fits, nothing stranded: Delta 0 -> 50
    assert scorer.raw_scores(state, job(1), all_nodes(state)).tolist() == [50]
    # CPU-only 6000: CPU left 2000 < 4000, the class no longer fits, F = 2000 free milli,
    # Delta = 2000 -> 100 * sigmoid(-2) = 11.92 -> 11
    assert scorer.raw_scores(state, job(0, cpu=6_000), all_nodes(state)).tolist() == [11]
