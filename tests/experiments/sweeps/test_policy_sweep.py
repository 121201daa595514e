"""The policy sweep: points, workload templates, one real tiny sweep with CSV/PNG/JSON."""

from __future__ import annotations

import json

import pytest

from gpumosaic.cli.compare.policies import compare_policies
from gpumosaic.errors import InputError
from gpumosaic.experiments.sweeps.policies import sweep_points, with_rate


def test_with_rate_appends_to_the_template():
    assert with_rate("gavel:window=4000-5000", 3.0) == "gavel:window=4000-5000,rate=3"
    assert with_rate("gavel:", 4.8) == "gavel:rate=4.8"


def test_points_are_the_cross_product_and_rate_is_reserved():
    points = sweep_points(["a", "b"], [1.0, 2.0], [0, 1, 2], "v100:2", "gavel:jobs=5", "strided")
    assert len(points) == 12 and points[0].policy == "a" and points[-1].seed == 2
    with pytest.raises(InputError, match="rate="):
        sweep_points(["a"], [1.0], [0], "v100:2", "gavel:jobs=5,rate=2", "strided")


def test_tiny_sweep_writes_csv_figure_and_json(tmp_path, capsys):
    compare_policies(
        ["max_min_fairness", "max_min_fairness_perf"],
        [6.0],
        [0],
        "v100:2,k80:2",
        "gavel:jobs=8",
        "strided",
        tmp_path,
        workers=1,
        as_json=True,
    )
    out = json.loads(capsys.readouterr().out)
    assert len(out["runs"]) == 2 and len(out["points"]) == 2
    assert all(run["completed"] == 8 for run in out["runs"])
    assert (tmp_path / "policy_runs.csv").read_text().count("\n") == 3
    assert (tmp_path / "jct_vs_rate.png").stat().st_size > 0


def test_unknown_policy_fails_before_running(tmp_path):
    with pytest.raises(InputError, match="unknown policy"):
        compare_policies(
            ["nope"], [1.0], [0], "v100:2", "gavel:jobs=3", "strided", tmp_path, 1, True
        )


def test_jct_vs_rate_figure_names_seeds_and_marks_identical_policies():
    from gpumosaic.experiments.sweeps.policies import PolicyRatePoint, jct_vs_rate_figure

    def point(policy: str, rate: float, jct: float) -> PolicyRatePoint:
        return PolicyRatePoint(
            policy=policy,
            rate_per_hour=rate,
            seeds=3,
            avg_jct_s_mean=jct * 3600.0,
            avg_jct_s_sd=1800.0,
            ftf_rho_max_mean=1.0,
            elapsed_s=1.0,
        )

    points = [
        point(p, r, j)
        for p, scale in (("fifo", 2.0), ("max_min_fairness", 1.0), ("las", 1.0))
        for r, j in ((1.0, 3.0), (2.0, 5.0), (4.0, 9.0))
        for j in (j * scale,)
    ]
    fig = jct_vs_rate_figure(points, "gavel:jobs=30 on v100:4, strided", seeds=[0, 1, 2])
    (ax,) = fig.axes
    assert fig.get_suptitle() == "gavel:jobs=30 on v100:4, strided, seeds 0-2"
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["fifo", "max_min_fairness", "las (= max_min_fairness)"]
    assert list(ax.get_xticks()) == [1.0, 2.0, 4.0] and ax.get_ylim()[0] == 0.0
    lines = [c.lines[0] for c in ax.containers]  # errorbar containers: (line, caps, bars)
    assert lines[1].get_marker() != lines[2].get_marker()
