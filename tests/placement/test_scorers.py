"""Every scorer on small hand-computed cases; the arithmetic of each score is in a comment."""

from __future__ import annotations

import numpy as np
import pytest
from placement_builders import all_nodes, cluster, job, occupy, workload

from gpumosaic.placement.scorers import (
    BestFitScorer,
    DotProdScorer,
    FgdScorer,
    FirstFitScorer,
    GpuClusteringScorer,
    GpuPackingScorer,
    PwrScorer,
    WorstFitScorer,
)

RNG = np.random.default_rng(0)


def test_dotprod() -> None:
    state = cluster(("T4", 2, 64_000), ("T4", 4, 16_000))
    j = job(1, 500, cpu=8_000)
    # n0: dot = 64000/128000 * 8000/128000 + 2000/8000 * 500/8000 = 0.03125 + 0.015625
    #     = 0.046875; 100 * (1 - 0.046875 / 2) = 97.66 -> 97
    # n1: dot = 16000/128000 * 0.0625 + 4000/8000 * 0.0625 = 0.0078125 + 0.03125
    #     = 0.0390625; 100 * (1 - 0.01953125) = 98.05 -> 98 (emptier in GPU, but less CPU)
    assert DotProdScorer().raw_scores(state, j, all_nodes(state)).tolist() == [97, 98]


def test_gpuclustering_bands() -> None:
    state = cluster(*[("T4", 4, 64_000)] * 4)
    occupy(state, 1, (0,), 300)  # n1: one sharing task
    occupy(state, 2, (0,), 300)  # n2: a sharing task and a 1-GPU task
    occupy(state, 2, (1,), 1000)
    occupy(state, 3, (1,), 1000)  # n3: a 1-GPU task only
    scorer = GpuClusteringScorer()
    # within-band bonus 25 * (8000 - free) // 8000:
    # n0 idle, free 4000 -> 25*4000//8000 = 12, band 25 -> 37
    # n1 only sharing, free 3700 -> 25*4300//8000 = 13, band 75 -> 88
    # n2 mixed incl. sharing, free 2700 -> 25*5300//8000 = 16, band 50 -> 66
    # n3 only other kinds, free 3000 -> 25*5000//8000 = 15, band 0 -> 15
    sharing = scorer.raw_scores(state, job(1, 500), all_nodes(state))
    assert sharing.tolist() == [37, 88, 66, 15]
    # a 1-GPU job: n1 only other kind -> 13; n2 mixed incl. 1-GPU -> 66; n3 only 1-GPU -> 90
    whole = scorer.raw_scores(state, job(1, 1000), all_nodes(state))
    assert whole.tolist() == [37, 13, 66, 75 + 15]
    assert scorer.raw_scores(state, job(0, cpu=1000), all_nodes(state)).tolist() == [0] * 4


def test_gpupacking_cases() -> None:
    state = cluster(("T4", 4, 64_000), ("T4", 4, 64_000), ("T4", 4, 64_000), ("T4", 2, 64_000))
    occupy(state, 1, (0,), 300)  # n1: GPU 0 has 700 free
    occupy(state, 2, (0,), 600)  # n2: GPU 0 has 400 free (too little for 500)
    scorer = GpuPackingScorer()
    # fractional 500:
    # n0 idle 4 GPUs: case c, 33 - 4 = 29
    # n1 fits on the used GPU (700 free): case a, 100 - (700*100//1000)//10 = 100 - 7 = 93
    # n2 must take a fully free GPU on a used node: case b, 50 - 1 = 49
    # n3 idle 2 GPUs: case c, 33 - 2 = 31
    assert scorer.raw_scores(state, job(1, 500), all_nodes(state)).tolist() == [29, 93, 49, 31]
    # 2 whole GPUs: used nodes n1, n2 -> case b, 50 - 2 = 48; idle nodes as above
    assert scorer.raw_scores(state, job(2), all_nodes(state)).tolist() == [29, 48, 48, 31]
    assert scorer.raw_scores(state, job(0, cpu=1), all_nodes(state)).tolist() == [0] * 4


def test_bestfit_raw_and_normalized() -> None:
    state = cluster(("T4", 2, 64_000), ("T4", 4, 16_000), ("T4", 8, 96_000))
    j = job(1, 1000, cpu=8_000)
    scorer = BestFitScorer()
    # n0: 0.5*(64000-8000)/128000 + 0.5*(2000-1000)/8000 = 0.21875 + 0.0625 = 0.28125
    #     -> 100 * (1 - 0.28125) = 71.875 -> 71
    # n1: 0.5*8000/128000 + 0.5*3000/8000 = 0.03125 + 0.1875 = 0.21875 -> 78.125 -> 78
    # n2: 0.5*88000/128000 + 0.5*7000/8000 = 0.34375 + 0.4375 = 0.78125 -> 21.875 -> 21
    raw = scorer.raw_scores(state, j, all_nodes(state))
    assert raw.tolist() == [71, 78, 21]
    # min-max: (71-21)*100//57 = 87, (78-21)*100//57 = 100, 0
    assert scorer.normalize(raw).tolist() == [87, 100, 0]
    assert scorer.normalize(np.array([5.0, 5.0])).tolist() == [0, 0]


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


def test_firstfit_and_worstfit_node_order() -> None:
    # Gavel-style one-GPU nodes with free 300, 800, 500 milli.
    state = cluster(("V100", 1, 16_000), ("V100", 1, 16_000), ("V100", 1, 16_000))
    occupy(state, 0, (0,), 700)
    occupy(state, 1, (0,), 200)
    occupy(state, 2, (0,), 500)
    nodes = all_nodes(state)
    # first fit: -index; worst fit: free GPU left * (max CPU + 1) + CPU left
    assert FirstFitScorer().raw_scores(state, job(1, 200), nodes).tolist() == [0, -1, -2]
    worst = WorstFitScorer().raw_scores(state, job(1, 200), nodes)
    assert worst.tolist() == [100 * 16_001 + 16_000, 600 * 16_001 + 16_000, 300 * 16_001 + 16_000]
