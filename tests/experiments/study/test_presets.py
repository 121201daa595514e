"""Shipped presets: each is the grid of the command it stands for, its references are the
code's reference tables, and its runs give that command's numbers (checked on one or two
points each, or a cut-down input, to keep the suite fast)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import pytest
from study_builders import experiment

from gpumosaic.experiments.reproductions.gandiva import SCENARIOS, VARIANTS
from gpumosaic.experiments.reproductions.gavel import (
    CONTINUOUS_REFERENCE,
    DEFAULT_CONTINUOUS_POLICIES,
    SHIPPED,
    STATIC_POLICIES,
    STATIC_REFERENCE,
    run_static,
)
from gpumosaic.experiments.reproductions.nvshare import REFERENCE_S, reproduce_nvshare
from gpumosaic.experiments.runner import RunRequest, run_request
from gpumosaic.experiments.study.file import load_experiment
from gpumosaic.experiments.study.kinds.registry import run_kind
from gpumosaic.experiments.study.presets import PRESETS, preset_path
from gpumosaic.experiments.sweeps.fill import FillRunSpec, run_one

DATA = Path(__file__).parents[3] / "src" / "gpumosaic" / "data" / "alibaba"


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_loads(name: str) -> None:
    study = load_experiment(preset_path(name))
    assert study.name == name and study.runs()


def test_preset_grids_are_the_reproduce_commands() -> None:
    fgd = load_experiment(preset_path("fgd-openb"))
    assert {(p.placement, p.seed) for p in (r.point for r in fgd.runs())} == set(
        itertools.product(
            ("random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd", "pwr"),
            range(42, 52),
        )
    )
    assert len(fgd.runs()) == 70
    static = load_experiment(preset_path("gavel-static"))
    assert [r.point.policy for r in static.runs()] == list(STATIC_POLICIES)
    continuous = load_experiment(preset_path("gavel-continuous"))
    assert {(p.policy, p.rate, p.seed) for p in (r.point for r in continuous.runs())} == set(
        itertools.product(DEFAULT_CONTINUOUS_POLICIES, (3.0, 4.8), (0, 1, 2))
    )
    gandiva = load_experiment(preset_path("gandiva"))
    assert {(p.scenario, p.variant) for p in (r.point for r in gandiva.runs())} == {
        (s.name, v.name) for s in SCENARIOS for v in VARIANTS
    }
    demo = load_experiment(preset_path("spatial-sharing"))
    assert len(demo.runs()) == 40  # make demo: 4 placements x seeds 0..9


def test_preset_references_are_the_code_reference_tables() -> None:
    static = load_experiment(preset_path("gavel-static"))
    for ref in static.reference:
        policy = str(ref.where["policy"])
        jct, makespan = STATIC_REFERENCE[SHIPPED.get(policy, policy)]
        assert ref.value == (jct if ref.metric == "avg_jct_h" else makespan)
    continuous = load_experiment(preset_path("gavel-continuous"))
    for ref in continuous.reference:
        key = (str(ref.where["policy"]), float(ref.where["rate"]))
        assert ref.value == CONTINUOUS_REFERENCE[key]
    nvshare = load_experiment(preset_path("nvshare"))
    cells = {
        (str(r.where["job"]), str(r.where["setup"]), r.where.get("tq_s")): r.value
        for r in nvshare.reference
    }
    assert cells == {k: float(v) for k, v in REFERENCE_S.items()}


def test_nvshare_preset_is_reproduce_nvshare() -> None:
    study = load_experiment(preset_path("nvshare"))
    kind = run_kind("nvshare")
    ours = {
        (p.job, p.setup, p.tq_s): product.metrics.total_s
        for p in (r.point for r in study.runs())
        for product in kind.run([p])
    }
    theirs = {(r.job, r.setup, r.tq_s): r.total_s for r in reproduce_nvshare()}
    assert ours == theirs


def test_spatial_sharing_preset_is_make_demo() -> None:
    point = next(
        r.point
        for r in load_experiment(preset_path("spatial-sharing")).runs()
        if r.point.placement == "fgd" and r.point.seed == 3
    )
    (product,) = run_kind("simulate").run([point])
    demo = RunRequest(
        cluster="v100:4",
        workload="gavel:jobs=50,rate=0,milli=spatial",
        policy="fifo",
        placement="fgd",
        seed=3,
    )  # fmt: skip  (what compare builds for make demo)
    expected = run_request(demo).summary
    assert replace(product.metrics, elapsed_s=0.0) == replace(expected, elapsed_s=0.0)


def test_gavel_static_preset_is_reproduce_gavel_static() -> None:
    point = next(
        r.point
        for r in load_experiment(preset_path("gavel-static")).runs()
        if r.point.policy == "fifo_as_shipped"
    )
    (product,) = run_kind("gavel").run([point])
    row = run_static("fifo_as_shipped")
    assert (product.metrics.avg_jct_h, product.metrics.makespan_h) == (
        row.avg_jct_h,
        row.makespan_h,
    )


def test_fill_kind_is_the_fill_table(tmp_path: Path) -> None:
    """The fill kind on a cut-down openb (40 nodes, 300 pods) gives compare --mode fill's
    numbers for the same inputs."""
    nodes = tmp_path / "nodes.csv"
    tasks = tmp_path / "tasks.csv"
    nodes.write_text("".join((DATA / "openb_node_list_gpu_node.csv").open().readlines()[:41]))
    tasks.write_text("".join((DATA / "openb_pod_list_default.csv").open().readlines()[:301]))
    text = f"""
[experiment]
name = "fill-small"
kind = "fill"
[grid]
tasks = "{tasks}"
nodes = "{nodes}"
placement = ["fgd", "bestfit"]
seed = 42
"""
    study = experiment(tmp_path, text)
    for planned in study.runs():
        (product,) = run_kind("fill").run([planned.point])
        p = planned.point
        reference = run_one(FillRunSpec(p.placement, p.seed, p.tasks, p.nodes, p.inflate))
        for pct in (90.0, 100.0, 130.0):
            at = reference.at_arrived(pct)
            assert getattr(product.metrics, f"allocation_rate_pct_{pct:.0f}") == (
                at.allocation_rate_pct
            )
            assert getattr(product.metrics, f"fragmentation_rate_pct_{pct:.0f}") == (
                at.fragmentation_rate_pct
            )
        placed = product.tables[2].table
        assert placed.num_rows > 0
