"""``compare`` writes the experiment file of what it runs: the same grid, as data."""

from __future__ import annotations

from pathlib import Path

from gpumosaic.experiments.study.compare_file import compare_experiment
from gpumosaic.experiments.study.file import parse_experiment

COMMON = dict(
    seeds=[0, 1], cluster="v100:4", workload="gavel:jobs=50,rate=0,milli=spatial",
    policy="fifo", rates=[], tasks="openb:default", nodes="openb:gpu", inflate=1.3,
    gpus_per_node=1, backfill=True, sharing=["none"], mechanism="auto",
)  # fmt: skip


def test_placement_sweep_file_has_the_same_runs() -> None:
    text = compare_experiment(mode="sim", placements=["strided", "pwr=200,fgd=800"],
                              policies=None, **COMMON)  # type: ignore[arg-type]  # fmt: skip
    study = parse_experiment(text, Path("experiment.toml"))
    points = [r.point for r in study.runs()]
    assert [(p.placement, p.seed) for p in points] == [
        ("strided", 0), ("strided", 1), ("pwr=200,fgd=800", 0), ("pwr=200,fgd=800", 1),
    ]  # fmt: skip
    assert {p.workload for p in points} == {COMMON["workload"]}


def test_policy_sweep_file_puts_the_rates_on_the_load_axis() -> None:
    options = {**COMMON, "rates": [1.0, 2.5], "workload": "gavel:window=10-20"}
    text = compare_experiment(mode="sim", placements=["strided"],
                              policies=["fifo", "max_min_fairness"], **options)  # type: ignore[arg-type]  # fmt: skip
    study = parse_experiment(text, Path("experiment.toml"))
    from gpumosaic.experiments.study.kinds.simulate import run_description

    specs = {run_description(r.point).workload for r in study.runs()}
    assert specs == {"gavel:window=10-20,rate=1", "gavel:window=10-20,rate=2.5"}


def test_fill_file() -> None:
    text = compare_experiment(mode="fill", placements=["fgd", "bestfit"], policies=None,
                              **COMMON)  # type: ignore[arg-type]  # fmt: skip
    study = parse_experiment(text, Path("experiment.toml"))
    assert study.kind.name == "fill" and len(study.runs()) == 4
