"""``gpumosaic serve`` refuses mistakes in one line (exit 2) before it starts Ray."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from gpumosaic.cli import app

runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--policy", "max_min_fairnes"], "--policy"),
        (["--placement", "fgdd"], "placement"),
        (["--cluster", "v100"], "--cluster"),
        (["--host", "0.0.0.0"], "--host"),
        (["--round-s", "0"], "--round-s"),
    ],
)
def test_serve_mistakes_are_one_line(args: list[str], field: str) -> None:
    result = runner.invoke(app, ["serve", "--cluster", "v100:1", *args])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and field in lines[0], result.output
