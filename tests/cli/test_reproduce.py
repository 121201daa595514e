"""``gpumosaic reproduce nvshare`` through typer's CliRunner."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import gpumosaic.cli.reproduce.group  # noqa: F401  registers the command
from gpumosaic.cli.app import app

runner = CliRunner()


def test_json_table_shape() -> None:
    result = runner.invoke(app, ["reproduce", "nvshare", "--tq", "1000,60,30", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    table = payload["table"]
    assert len(table) == 4 * (2 + 3)
    for row in table:
        assert {"job", "setup", "tq_s", "total_s"} <= set(row)
        assert row["job"] in {"small_50", "small_90", "big_50", "big_90"}
        assert row["setup"] in {"serial", "off", "on"}
        assert (row["tq_s"] is None) == (row["setup"] != "on")
        assert isinstance(row["total_s"], float) and row["total_s"] > 0
    tqs = {row["tq_s"] for row in table if row["setup"] == "on"}
    assert tqs == {1000, 60, 30}
    assert all(abs(r["error_pct"]) <= 15 for r in table if r["error_pct"] is not None)


def test_any_tq_and_rich_table() -> None:
    result = runner.invoke(app, ["reproduce", "nvshare", "--tq", "12.5"])
    assert result.exit_code == 0, result.output
    assert "12.5" in result.output and "small_50" in result.output
    data = json.loads(runner.invoke(app, ["reproduce", "nvshare", "--tq", "7", "--json"]).output)
    assert {r["tq_s"] for r in data["table"] if r["setup"] == "on"} == {7}


def test_bad_tq_is_one_line_and_exit_2() -> None:
    for bad in ("abc", "0", "-5", ","):
        result = runner.invoke(app, ["reproduce", "nvshare", "--tq", bad])
        assert result.exit_code == 2, (bad, result.output)
        assert "Traceback" not in result.output


@pytest.mark.slow
def test_reproduce_gavel_static_shipped_gandiva_within_5_percent() -> None:
    import gpumosaic.cli.reproduce.gavel  # noqa: F401  registers the command

    args = ["reproduce", "gavel", "static", "--policies", "gandiva_as_shipped", "--workers", "1"]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)["rows"]
    assert row["policy"] == "gandiva_as_shipped" and row["completed"] == 100
    # Gavel's Gandiva on minimize_makespan.trace: 9.74 h avg JCT, 21.11 h makespan.
    assert abs(row["avg_jct_h"] / 9.74 - 1) < 0.05
    assert abs(row["makespan_h"] / 21.11 - 1) < 0.05


def test_reproduce_gavel_unknown_policy_is_one_line() -> None:
    import gpumosaic.cli.reproduce.gavel  # noqa: F401

    result = runner.invoke(app, ["reproduce", "gavel", "static", "--policies", "nope"])
    assert result.exit_code == 2
    assert "unknown policy 'nope'" in result.output and "Traceback" not in result.output
