"""Gavel's fifo and gandiva as shipped: the behaviours that explain Gavel's numbers."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np

from gpumosaic.experiments.reproductions.gavel_quirks import GavelShippedFifo, GavelShippedGandiva

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "policies"))
from policy_builders import make_input


def test_shipped_fifo_records_every_job_on_the_last_sorted_type() -> None:
    # 3 single-GPU jobs, 1 GPU of each type: the drawn type is never used and every job is
    # recorded on "v100" (the last of k80 < p100 < v100), whatever type was drawn.
    inp = make_input([[1.0, 1.0, 1.0]] * 3, [1, 1, 1], gpu_types=("k80", "p100", "v100"))
    alloc = GavelShippedFifo(seed=0).allocate(inp)
    assert alloc.matrix[:, 2].tolist() == [1.0, 1.0, 1.0]
    assert alloc.matrix[:, :2].sum() == 0.0


def test_shipped_gandiva_equal_shares_while_jobs_fit() -> None:
    # 2 jobs of scale factors 1 and 2 on 2 + 2 GPUs: demand 3 <= 4, no packing.
    # share per type = capacity / m / sf: job 0: 2/2/1 = 1 per type, row sum 2 -> 0.5 each;
    # job 1: 2/2/2 = 0.5 per type, row sum 1 -> kept at 0.5.
    inp = make_input([[1.0, 1.0], [1.0, 1.0]], [2, 2], scale_factors=[1, 2])
    alloc = GavelShippedGandiva(seed=0).allocate(inp)
    np.testing.assert_allclose(alloc.matrix, [[0.5, 0.5], [0.5, 0.5]])
    assert alloc.pair_matrix is None


def test_shipped_gandiva_pairs_unrunnable_multi_gpu_jobs_then_drops_them() -> None:
    # Two 2-GPU jobs on 2 GPUs (demand 4 > 2): the only equal-scale pair is drawn even
    # though nothing measures it. Its candidate rates (an estimate) are ignored: the pair
    # gets the group's share (2 / 1 group / sf 2 = 1) with rates 0, so it can never run.
    inp = make_input(
        [[4.0], [2.0]], [2], scale_factors=[2, 2], pairs=[(0, 1)], pair_rates=[[(2.0, 1.0)]]
    )
    policy = GavelShippedGandiva(seed=0)
    first = policy.allocate(inp)
    assert first.packed is not None and first.pair_matrix is not None
    assert first.packed.pairs.tolist() == [[0, 1]]
    assert first.packed.throughputs.tolist() == [[[0.0, 0.0]]]
    np.testing.assert_allclose(first.pair_matrix, [[1.0]])
    assert first.matrix.sum() == 0.0  # the paired jobs have no share of their own
    # Next solve: normalized packed throughput 0 < 1, so the pair is dropped and partners
    # are drawn again (a kept pair would not touch the random stream).
    draws = _count_draws(policy)
    policy.allocate(inp)
    assert draws.calls == 1


def test_shipped_gandiva_keeps_a_measured_single_gpu_pair_that_beats_time_slicing() -> None:
    # Three single-GPU jobs on 1 GPU of each of 2 types: demand 3 > 2, packing deployed.
    # Pair rates normalized: (0.6/1 + 0.6/1) per type, summed over 2 types = 2.4 >= 1: kept.
    thr = [[1.0, 1.0]] * 3
    rates = [[(0.6, 0.6), (0.6, 0.6)]] * 3
    inp = make_input(thr, [1, 1], pairs=[(0, 1), (0, 2), (1, 2)], pair_rates=rates)
    policy = GavelShippedGandiva(seed=3)
    first = policy.allocate(inp)
    assert first.packed is not None and first.pair_matrix is not None
    a, b = first.packed.pairs[0].tolist()
    single = ({0, 1, 2} - {a, b}).pop()
    # 2 groups: share per type = 1 / 2 / 1 = 0.5, rows sum to 1.
    np.testing.assert_allclose(first.pair_matrix, [[0.5, 0.5]])
    np.testing.assert_allclose(first.matrix[single], [0.5, 0.5])
    draws = _count_draws(policy)
    second = policy.allocate(inp)
    assert second.packed is not None
    assert second.packed.pairs[0].tolist() == [a, b]
    assert draws.calls == 0  # the pair was kept, the lone single needs no draw


class _CountingRandom:
    def __init__(self, inner: random.Random) -> None:
        self.inner = inner
        self.calls = 0

    def sample(self, population: list[int], k: int) -> list[int]:
        self.calls += 1
        return self.inner.sample(population, k)


def _count_draws(policy: GavelShippedGandiva) -> _CountingRandom:
    counting = _CountingRandom(policy._rng)
    policy._rng = counting  # type: ignore[assignment]
    return counting
