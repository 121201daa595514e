"""The GPU a job takes inside its node: each scorer's rule for a fractional job, the
lowest fully free GPUs for whole-GPU jobs."""

from __future__ import annotations

import numpy as np
import pytest
from placement_builders import cluster, job, occupy

from gpumosaic.placement.gpu_choice import best_fit_gpu
from gpumosaic.placement.scorers import BestFitScorer, FirstFitScorer, WorstFitScorer

RNG = np.random.default_rng(0)


@pytest.mark.parametrize(
    ("scorer", "expected_gpu"),
    [(FirstFitScorer(), 0), (BestFitScorer(), 2), (WorstFitScorer(), 1)],
)
def test_fractional_gpu_choice(scorer: object, expected_gpu: int) -> None:
    state = cluster(("T4", 3, 64_000))
    occupy(state, 0, (0,), 300)  # free [700, 1000, 600]
    occupy(state, 0, (2,), 400)
    assert scorer.assignment(state, job(1, 500), 0, RNG).gpus == (expected_gpu,)  # type: ignore[attr-defined]


def test_whole_gpus_take_lowest_fully_free() -> None:
    state = cluster(("T4", 4, 64_000))
    occupy(state, 0, (1,), 300)  # free [1000, 700, 1000, 1000]
    assert BestFitScorer().assignment(state, job(2), 0, RNG).gpus == (0, 2)


def test_best_fit_gpu_is_the_scorers_rule() -> None:
    free = np.array([700, 1000, 600, 600], dtype=np.int32)
    assert best_fit_gpu(free, 500) == 2  # least free that fits, first on ties
    assert best_fit_gpu(free, 650) == 0
    with pytest.raises(ValueError, match="no GPU has 1100 milli free"):
        best_fit_gpu(free, 1100)
