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
    assert outcome.result.leases is not None
    failures = outcome.result.leases.placement_failures
    assert failures > 0
    assert outcome.summary.fallbacks.count(Fallback.PLACEMENT_FAILED) == failures


def test_packed_policy_on_a_model_without_packed_rates_counts_a_fallback() -> None:
    """``*_packed`` needs Gavel's packed rates on every GPU model; T4 has none, so every
    solve runs without pairs (as ``*_perf``): counted, in --json and one stderr line."""
    args = ["simulate", "--cluster", "v100:2,t4:2", "--workload", "gavel:jobs=12,rate=0"]
    packed = runner.invoke(app, [*args, "--policy", "max_min_fairness_packed", "--json"])
    assert packed.exit_code == 0, packed.output
    summary = json.loads(packed.stdout)
    # Every solve with two or more jobs (the last ones have one job: no pair to miss).
    missing = summary["fallbacks"]["packed_rates_missing"]
    assert summary["fallbacks"].keys() == {"packed_rates_missing"}
    assert 0 < missing <= summary["policy_solves"]
    lines = [line for line in packed.stderr.splitlines() if "fallbacks" in line]
    assert len(lines) == 1 and "packed_rates_missing" in lines[0]
    perf = runner.invoke(app, [*args, "--policy", "max_min_fairness_perf", "--json"])
    assert json.loads(perf.stdout)["fallbacks"] == {}
    # On measured models only, the packed policy packs and counts nothing.
    measured = ["simulate", "--cluster", "v100:2,k80:2", "--workload", "gavel:jobs=12,rate=0"]
    ok = runner.invoke(app, [*measured, "--policy", "max_min_fairness_packed", "--json"])
    assert json.loads(ok.stdout)["fallbacks"] == {}


def test_every_fallback_warning_says_what_to_change() -> None:
    """Issue 36: a count alone ("719886 x job chosen for a round found no GPUs") leaves
    the user nowhere; each kind names what to change."""
    from gpumosaic.fallbacks import Fallback, Fallbacks

    for kind in Fallback:
        line = Fallbacks.of(kind, 3).warning()
        assert line.startswith(f"fallbacks: 3 x {kind.text} ({kind.value}; to change: ")
        advice = line.split("to change: ")[1]
        assert len(advice) > 20, line
