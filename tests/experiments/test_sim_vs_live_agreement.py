"""The numbers every sim-vs-live comparison reports (``experiments.sim_vs_live.Agreement``)
and its table, on made-up summaries: the arithmetic, the ``--json`` keys, the printout."""

from __future__ import annotations

import dataclasses
import math

import pytest

from gpumosaic.cli.sim_vs_live.command import print_agreement
from gpumosaic.experiments.sim_vs_live.agreement import JobDiff
from gpumosaic.experiments.sim_vs_live.rounds import Comparison
from gpumosaic.results.summary_value import Summary

KEYS = {
    "sim", "live", "avg_jct_rel_diff", "makespan_rel_diff", "per_job_rel_diff_median",
    "per_job_rel_diff_p90", "rounds_identical", "time_scale", "wall_s",
}  # fmt: skip


def summary(avg_jct_s: float, makespan_s: float, completed: int = 3) -> Summary:
    values: dict[str, object] = {}
    for f in dataclasses.fields(Summary):
        if f.name == "fallbacks":
            continue
        values[f.name] = 0.0 if f.type == "float" else 0
    values.update(avg_jct_s=avg_jct_s, makespan_s=makespan_s, completed=completed, jobs=3)
    return Summary(**values)


def comparison(sim: Summary, live: Summary, jobs: tuple[JobDiff, ...]) -> Comparison:
    return Comparison(
        sim=sim, live=live, jobs=jobs, time_scale=50.0, wall_s=12.0, rounds_identical=4,
        launch_latency_s=18.0, launch_latency_wall_s=0.36, round_s=360.0, live_finished=True,
        launches=7, extensions=9,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("sim_jcts", "live_jcts", "median", "p90"),
    [
        ((100.0, 200.0, 400.0), (110.0, 180.0, 400.0), 0.1, 0.1),  # |+10 %|, |-10 %|, 0
        ((100.0, 100.0, 100.0), (100.0, 150.0, 300.0), 0.5, 1.7),  # 0, 0.5, 2.0
    ],
)
def test_per_job_differences_are_absolute_and_relative_to_the_simulator(
    sim_jcts: tuple[float, ...], live_jcts: tuple[float, ...], median: float, p90: float
) -> None:
    jobs = tuple(JobDiff(i, s, v) for i, (s, v) in enumerate(zip(sim_jcts, live_jcts, strict=True)))
    c = comparison(summary(200.0, 400.0), summary(210.0, 380.0), jobs)
    assert c.avg_jct_rel_diff == pytest.approx(0.05)  # signed: (live - sim) / sim
    assert c.makespan_rel_diff == pytest.approx(-0.05)
    assert c.per_job_quantile(0.5) == pytest.approx(median)
    assert c.per_job_quantile(0.9) == pytest.approx(p90)
    assert c.latency_share == pytest.approx(0.05)  # 18 s of a 360 s round


def test_json_has_the_issue_keys_and_null_for_what_is_missing() -> None:
    c = comparison(summary(math.nan, 400.0, completed=0), summary(210.0, 380.0), ())
    out = c.to_json()
    assert set(out) == KEYS
    assert out["avg_jct_rel_diff"] is None and out["per_job_rel_diff_median"] is None
    assert out["rounds_identical"] == 4 and out["time_scale"] == 50.0
    live = out["live"]
    assert isinstance(live, dict)
    assert live["launches"] == 7 and live["finished"] is True and live["avg_jct_s"] == 210.0


def test_the_table_prints_both_sides_and_the_differences(
    capsys: pytest.CaptureFixture[str],
) -> None:
    jobs = (JobDiff(0, 100.0, 110.0), JobDiff(1, 100.0, 100.0))
    c = comparison(summary(200.0, 400.0), summary(210.0, 380.0), jobs)
    print_agreement("sim vs live", c, [("rounds", "5", "6", "4 same")], "the tail line")
    out = capsys.readouterr().out
    assert "time scale 50" in out and "+5.00%" in out and "-5.00%" in out
    assert "4 same" in out
    assert "median +5.00%" in out and "the tail line" in out
