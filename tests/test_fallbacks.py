"""Fallbacks are counted by kind, reported under ``fallbacks`` and named on stderr."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from gpumosaic.cli import app
from gpumosaic.fallbacks import Fallback, Fallbacks
from gpumosaic.run.build import run
from gpumosaic.run.description import RunDescription

runner = CliRunner()


def test_counts_add_up_by_kind_in_a_fixed_order() -> None:
    total = Fallbacks.total(
        [
            Fallbacks.of(Fallback.UNMEASURED_PAIR, 2),
            Fallbacks(),
            Fallbacks.of(Fallback.SLOS_DROPPED),
            Fallbacks.of(Fallback.UNMEASURED_PAIR, 0),
            Fallbacks.of(Fallback.UNMEASURED_PAIR),
        ]
    )
    assert total.to_json() == {"slos_dropped": 1, "unmeasured_pair": 3}
    assert total.count(Fallback.PLACEMENT_FAILED) == 0 and not Fallbacks()
    assert total.warning().startswith("fallbacks: 1 x SLOs infeasible")


def test_unmeasured_pairs_are_reported_in_json_and_one_stderr_line() -> None:
    args = ["simulate", "--cluster", "v100:2", "--workload", "gavel:jobs=20,rate=0,milli=spatial"]
    result = runner.invoke(app, [*args, "--sharing", "measured", "--json"])
    assert result.exit_code == 0, result.output
    fallbacks = json.loads(result.stdout)["fallbacks"]
    assert fallbacks["unmeasured_pair"] > 0
    lines = [line for line in result.stderr.splitlines() if "fallbacks" in line]
    assert len(lines) == 1 and "unmeasured_pair" in lines[0]
    quiet = runner.invoke(app, [*args, "--json"])
    assert json.loads(quiet.stdout)["fallbacks"] == {} and "fallbacks" not in quiet.stderr


def test_round_placement_failures_are_fallbacks() -> None:
    description = RunDescription(
        cluster="v100:2",
        workload="gavel:jobs=20,rate=0,milli=spatial",
        policy="max_min_fairness",
        seed=1,
    )
    outcome = run(description)
    failures = dict(outcome.result.extra)["placement_failures"]
    assert failures > 0
    assert outcome.summary.fallbacks.count(Fallback.PLACEMENT_FAILED) == failures
