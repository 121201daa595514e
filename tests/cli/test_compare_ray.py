"""``gpumosaic compare --executor ray``: the comparison's study through the study executor,
each run a Ray task on the test run's one local Ray instance (``ray_cluster``, CPU tasks),
stored as it ends; a rerun skips them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpumosaic.cli import app

ray = pytest.importorskip("ray")
runner = CliRunner()


def _compare(out: Path) -> dict[str, object]:
    args = [
        "compare", "--cluster", "v100:4", "--workload", "gavel:jobs=6,rate=0",
        "--placements", "strided,fgd", "--seeds", "0-1", "--out", str(out),
        "--executor", "ray", "--workers", "2", "--json",
    ]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout[result.stdout.index("{") :]))


@pytest.mark.slow
def test_ray_sweep_stores_every_run_and_a_restart_skips_them(
    tmp_path: Path, ray_cluster: object
) -> None:
    out = tmp_path / "cmp"
    first = _compare(out)
    assert (first["planned"], first["skipped"], first["ran"], first["failed"]) == (4, 0, 4, [])
    assert (out / "experiment.toml").is_file()
    # Interrupted and restarted (here: simply run again): the stored runs are skipped.
    again = _compare(out)
    assert (again["planned"], again["skipped"], again["ran"]) == (4, 4, 0)


def test_ray_address_needs_the_ray_executor(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["compare", "--out", str(tmp_path / "x"), "--ray-address", "127.0.0.1:6379"]
    )
    assert result.exit_code != 0
    assert "--executor ray" in result.output
