"""The registry: names, aliases, weighted combinations, and clear errors."""

from __future__ import annotations

import numpy as np
import pytest
from placement_builders import cluster, job, occupy, workload

from gpumosaic.errors import InputError
from gpumosaic.placement.registry import (
    PlacementChoice,
    build_placement,
    parse_placement,
    placement_names,
)
from gpumosaic.placement.scorers import FgdScorer, RandomPlacement, ScoredPlacement

WL = workload((1, 500, 0, 1.0))


@pytest.mark.parametrize(
    ("spec", "name"),
    [
        ("FGD", "fgd"),
        ("fgd-exact", "fgd-exact"),
        ("Best-Fit", "bestfit"),
        ("best_fit", "bestfit"),
        ("worst-fit", "worstfit"),
        ("strided", "worstfit"),
        ("first-fit", "firstfit"),
        ("GpuPacking", "gpupacking"),
        ("gpu-clustering", "gpuclustering"),
        ("dotprod", "dotprod"),
        ("pwr", "pwr"),
        ("random", "random"),
        ("pwr=200,fgd=800", "pwr=200,fgd=800"),
    ],
)
def test_names(spec: str, name: str) -> None:
    assert build_placement(spec, WL).name == name


def test_every_listed_name_builds() -> None:
    for name in placement_names():
        assert build_placement(name, WL).name


def test_combination_weights_and_gpu_choice() -> None:
    strategy = build_placement("pwr=200,fgd=800", WL)
    assert isinstance(strategy, ScoredPlacement)
    assert [m.weight for m in strategy.members] == [200, 800]
    assert isinstance(strategy.gpu_chooser, FgdScorer)  # highest weight picks the GPU
    assert isinstance(build_placement("random", None), RandomPlacement)


def test_combination_is_weighted_sum_of_normalized_scores() -> None:
    # T4 nodes, M = 1 x 500. n0 has a busy GPU with 600 free; n1 is idle.
    state = cluster(("T4", 2, 32_000), ("T4", 2, 32_000))
    occupy(state, 0, (0,), 400, cpu=2_000)
    strategy = build_placement("pwr=200,fgd=800", WL)
    assert isinstance(strategy, ScoredPlacement)
    j = job(1, 300, cpu=2_000)
    # PWR raw: n0 adds nothing (busy GPU, socket already active) -> 0; n1 +105 +60 -> -165;
    #   normalized: n0 100, n1 0.
    # FGD: n0 best on GPU 1 ([600, 700], nothing stranded, Delta 0) -> 50; GPU 0 would strand
    #   300 -> 42. n1 -> [700, 1000], Delta 0 -> 50.
    # total: n0 200*100 + 800*50 = 60000; n1 200*0 + 800*50 = 40000
    scores = strategy.scores(state, j, np.array([0, 1]))
    assert scores.tolist() == [60_000, 40_000]
    a = strategy.place(state, j, np.random.default_rng(0))
    assert a is not None and (a.node, a.gpus) == (0, (1,))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nope", "--placement nope: unknown placement"),
        ("pwr=abc,fgd=800", "not a number"),
        ("pwr=-1,fgd=800", "must be a number > 0 and at most"),
        ("pwr=inf,fgd=800", "must be a number > 0 and at most 1e\\+06, got inf"),
        ("pwr=nan,fgd=800", "got nan"),
        ("pwr=1e308,fgd=1e308", "got 1e308"),  # finite, but their sum is not
        ("random=1,fgd=2", "cannot be combined"),
        ("", "empty placement"),
    ],
)
def test_errors(spec: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as built:
        build_placement(spec, WL)
    # The grammar alone (no scorer: a user mistake's quick check) refuses it the same way.
    with pytest.raises(InputError) as parsed:
        parse_placement(spec)
    assert str(parsed.value) == str(built.value)


def test_the_grammar_reads_names_and_weights() -> None:
    assert parse_placement("Best-Fit") == PlacementChoice(False, (("bestfit", 1000.0),))
    assert parse_placement("strided").members == (("worstfit", 1000.0),)
    assert parse_placement("random").random
    choice = parse_placement("pwr=200,fgd-exact=800")
    assert choice.weighted and choice.members == (("pwr", 200.0), ("fgdexact", 800.0))


def test_fgd_needs_workload() -> None:
    with pytest.raises(InputError, match="target workload"):
        build_placement("fgd", None)


def test_ties_follow_one_permutation_per_state() -> None:
    # Four identical idle nodes: every score ties, so the node order of the run decides.
    state = cluster(*[("T4", 2, 64_000)] * 4)
    strategy = build_placement("bestfit", None)
    assert isinstance(strategy, ScoredPlacement)
    rank = strategy.node_order(state, np.random.default_rng(7))
    first = strategy.place(state, job(1, 100), np.random.default_rng(99))
    assert first is not None and first.node == int(np.argmin(rank))
    # the same order later in the run, whatever rng is passed then
    again = strategy.place(state, job(1, 100), np.random.default_rng(123))
    assert again is not None and again.node == first.node


def test_cache_notices_node_changes() -> None:
    state = cluster(("T4", 2, 64_000), ("T4", 2, 64_000))
    strategy = build_placement("gpupacking", None)
    rng = np.random.default_rng(0)
    a = strategy.place(state, job(1, 300), rng)
    assert a is not None
    state.allocate(a)
    # the used node now scores 100 - 7 = 93 (700 free) against 31 for the idle one
    b = strategy.place(state, job(1, 300), rng)
    assert b is not None and b.node == a.node
