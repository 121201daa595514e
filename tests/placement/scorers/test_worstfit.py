"""WorstFit on a hand-made node set; the arithmetic of each score is in a comment."""

from __future__ import annotations

from placement_builders import all_nodes, cluster, job, occupy

from gpumosaic.placement.scorers import WorstFitScorer


def test_worstfit_packs_gpu_left_then_cpu_left() -> None:
    # Gavel-style one-GPU nodes with free 300, 800, 500 milli; n2 has 4000 milli-CPU busy.
    state = cluster(("V100", 1, 16_000), ("V100", 1, 16_000), ("V100", 1, 16_000))
    occupy(state, 0, (0,), 700)
    occupy(state, 1, (0,), 200)
    occupy(state, 2, (0,), 500, cpu=4_000)
    # free GPU milli left * (largest node CPU + 1) + CPU left, for 200 milli and 1000 CPU:
    # n0: 100 * 16001 + 15000; n1: 600 * 16001 + 15000; n2: 300 * 16001 + 11000
    worst = WorstFitScorer().raw_scores(state, job(1, 200, cpu=1_000), all_nodes(state))
    assert worst.tolist() == [100 * 16_001 + 15_000, 600 * 16_001 + 15_000, 300 * 16_001 + 11_000]
    # a CPU-only job: all GPU milli stays, the CPU decides within equal GPU
    cpu_only = WorstFitScorer().raw_scores(state, job(0, cpu=2_000), all_nodes(state))
    assert cpu_only.tolist() == [
        300 * 16_001 + 14_000,
        800 * 16_001 + 14_000,
        500 * 16_001 + 10_000,
    ]
