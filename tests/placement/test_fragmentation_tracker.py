"""The incremental FragmentationTracker agrees with the reference vectorized measure."""

from __future__ import annotations

import numpy as np
from placement_builders import cluster, job, occupy, workload

from gpumosaic.placement.fragmentation import (
    FragmentationTracker,
    fragmentation_rate,
    node_fragmentation,
)
from gpumosaic.placement.registry import build_placement


def test_hand_case() -> None:
    # M: 1 x 500 with 4000 CPU (p 0.5) and CPU-only (p 0.5).
    wl = workload((1, 500, 4_000, 0.5), (0, 0, 1_000, 0.5))
    state = cluster(("T4", 2, 8_000))
    occupy(state, 0, (0,), 700, cpu=2_000)  # free [300, 1000], CPU 6000 left
    tracker = FragmentationTracker(state, wl)
    # class 1 fits (GPU 1), stranded = 300 -> 0.5 * 300; CPU-only -> all free 1300 * 0.5
    assert tracker.frag.tolist() == [0.5 * 300 + 0.5 * 1300]
    occupy(state, 0, (1,), 100, cpu=3_000)  # CPU 3000 left < 4000: class 1 cannot fit
    tracker.refresh()
    # F(class 1) = all free = 1200; CPU-only = 1200
    assert tracker.frag.tolist() == [1200.0]
    assert tracker.rate() == 1.0


def test_matches_reference_after_random_fill() -> None:
    wl = workload(
        (1, 500, 2_000, 0.4), (1, 1000, 4_000, 0.3), (2, 1000, 8_000, 0.2), (0, 0, 1_000, 0.1)
    )
    state = cluster(
        ("T4", 2, 32_000), ("G2", 8, 96_000), ("P100", 4, 16_000), ("V100M16", 8, 64_000)
    )
    tracker = FragmentationTracker(state, wl)
    strategy = build_placement("random", None)
    rng = np.random.default_rng(3)
    for _ in range(60):
        n = int(rng.choice([0, 1, 1, 2]))
        milli = int(rng.integers(1, 1000)) if n == 1 and rng.random() < 0.6 else 1000
        a = strategy.place(state, job(n, milli, cpu=int(rng.integers(0, 6_000))), rng)
        if a is not None:
            state.allocate(a)
        tracker.refresh()
        np.testing.assert_allclose(tracker.frag, node_fragmentation(state, wl), rtol=1e-12)
        assert abs(tracker.rate() - fragmentation_rate(state, wl)) < 1e-12


def test_one_node_refresh_is_bit_identical_to_a_full_recount() -> None:
    # FGD's score compares F before and after; a Delta of exactly 0 (score 50) needs the
    # incremental one-node path and the many-node recount to agree bit for bit.
    wl = workload(
        (1, 500, 2_000, 0.37), (1, 330, 4_000, 0.29), (2, 1000, 8_000, 0.21), (0, 0, 1_000, 0.13)
    )
    state = cluster(*[("T4", 2, 32_000), ("G2", 8, 96_000), ("V100M16", 8, 64_000)] * 4)
    tracker = FragmentationTracker(state, wl)
    strategy = build_placement("random", None)
    rng = np.random.default_rng(8)
    for _ in range(150):
        milli = int(rng.integers(1, 1000))
        a = strategy.place(state, job(1, milli, cpu=int(rng.integers(0, 9_000))), rng)
        if a is not None:
            state.allocate(a)
            tracker.refresh()  # one stale node: the 1-D path
    fresh = FragmentationTracker(state, wl)  # every node at once: the (K, C, M) path
    assert np.array_equal(tracker.frag, fresh.frag)
    assert np.array_equal(tracker.fit_count, fresh.fit_count)
    assert np.array_equal(tracker.below, fresh.below)
