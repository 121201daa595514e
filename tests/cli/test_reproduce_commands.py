"""``gpumosaic reproduce gandiva`` and ``gavel-openb``. The old ``python -m
gpumosaic.experiments.X`` entry points are gone: they imported the command line from below
it (a package cycle, issue 25)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import gpumosaic.experiments.reproductions.gandiva as gandiva_study
from gpumosaic.cli import app
from gpumosaic.experiments.reproductions.gandiva import Scenario

runner = CliRunner()
TINY = (Scenario("tiny", (("v100", 4),), 4, 4.0, False, (0, 8), 8),)


def test_reproduce_gandiva_json_has_rows_and_packing_gains(monkeypatch) -> None:
    monkeypatch.setattr(gandiva_study, "QUICK_SCENARIOS", TINY)  # read at the call
    result = runner.invoke(app, ["reproduce", "gandiva", "--quick", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert [r["scenario"] for r in payload["rows"]] == ["tiny"] * 5
    assert all(r["measured_done"] == 8 for r in payload["rows"])
    [gain] = payload["packing_gains"]
    by_variant = {r["variant"]: r for r in payload["rows"]}
    on, off = by_variant["+ packing + migration"], by_variant["+ migration"]
    assert gain["scenario"] == "tiny"
    assert gain["work_per_busy_gain"] == pytest.approx(
        on["work_per_busy"] / off["work_per_busy"] - 1
    )


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--window", "4000"], "--window"),
        (["--window", "50-10"], "--window"),
        (["--rates", "fast"], "--rates"),
        (["--rates", "-3"], "--rates"),
        (["--placements", ","], "--placements"),
        (["--seeds", "two"], "--seeds"),
    ],
)
def test_gavel_openb_bad_arguments_are_one_line(args: list[str], field: str) -> None:
    result = runner.invoke(app, ["reproduce", "gavel-openb", *args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.output.startswith(f"error: {field}") and result.output.count("\n") == 1


@pytest.mark.parametrize("name", ["gavel_openb", "gavel_repro", "gandiva_eval"])
def test_the_old_shims_that_imported_the_cli_are_gone(name: str) -> None:
    import importlib.util

    assert importlib.util.find_spec(f"gpumosaic.experiments.{name}") is None
