"""``gpumosaic fill`` and ``compare_fill`` end to end on tiny CSV files.

(Named test_fill_command.py: tests/experiments/test_fill.py has the basename test_fill and
the test folders are not packages.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpumosaic.cli.app import app
from gpumosaic.cli.compare.fill import compare_fill
from gpumosaic.cli.fill import fill as _fill_command  # noqa: F401  (registers the command)

NODES = "sn,cpu_milli,memory_mib,gpu,model\nn0,32000,65536,2,T4\nn1,64000,65536,4,V100M16\n"
TASKS = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
    "p0,4000,1024,1,500\np1,8000,1024,1,1000\np2,2000,512,0,0\np3,4000,1024,2,1000\n"
    "p4,1000,1024,1,250\np5,4000,1024,1,700\n"
)


def files(tmp_path: Path) -> tuple[str, str]:
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "tasks.csv").write_text(TASKS)
    return str(tmp_path / "nodes.csv"), str(tmp_path / "tasks.csv")


def test_fill_json(tmp_path: Path) -> None:
    nodes, tasks = files(tmp_path)
    args = ["fill", "--nodes", nodes, "--tasks", tasks, "--placement", "pwr=200,fgd=800"]
    result = CliRunner().invoke(app, [*args, "--seed", "3", "--json", "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    keys = {"arrived_pct", "allocation_rate_pct", "fragmentation_rate_pct", "power_w"}
    assert keys <= set(payload["final"]) and all(keys <= set(p) for p in payload["curve"])
    assert payload["curve"][-1] == payload["final"]
    assert payload["final"]["arrived_pct"] >= 130
    failed = payload["failed_tasks"]
    assert failed["count"] == sum(failed["by_reason"].values()) == sum(failed["by_kind"].values())
    # Nothing is allocated that did not arrive; the failed tasks' share is the difference.
    assert payload["final"]["allocation_rate_pct"] <= payload["final"]["arrived_pct"]
    assert payload["placement"] == "pwr=200,fgd=800"
    written = {p.name for p in (tmp_path / "o").iterdir() if not p.name.startswith(".")}
    assert written == {"curve.csv", "summary.json", "fill.png"}  # and the folder's lock file


def test_fill_rich_summary(tmp_path: Path) -> None:
    nodes, tasks = files(tmp_path)
    result = CliRunner().invoke(app, ["fill", "--nodes", nodes, "--tasks", tasks])
    assert result.exit_code == 0, result.output
    assert "allocation" in result.stdout and "failed tasks" in result.stdout


def test_fill_user_errors_exit_2(tmp_path: Path) -> None:
    nodes, tasks = files(tmp_path)
    runner = CliRunner()
    bad = runner.invoke(app, ["fill", "--nodes", nodes, "--tasks", tasks, "--placement", "nope"])
    assert bad.exit_code == 2 and "unknown placement" in bad.output
    bad = runner.invoke(app, ["fill", "--nodes", nodes, "--tasks", tasks, "--inflate", "0"])
    assert bad.exit_code == 2 and "--inflate" in bad.output
    (tmp_path / "broken.csv").write_text(TASKS.replace("p4,1000", "p4,lots"))
    bad = runner.invoke(app, ["fill", "--nodes", nodes, "--tasks", str(tmp_path / "broken.csv")])
    assert bad.exit_code == 2
    assert "row 5" in bad.output and "cpu_milli" in bad.output and "broken.csv" in bad.output


@pytest.mark.slow  # a whole fill comparison with its figures: seconds of CPU
def test_compare_fill_writes_figures_and_tables(tmp_path: Path, capsys: object) -> None:
    nodes, tasks = files(tmp_path)
    out = tmp_path / "cmp"
    compare_fill(["bestfit", "fgd"], [1, 2], tasks, nodes, 1.3, out, workers=1, as_json=True)
    payload = json.loads(capsys.readouterr().out)  # type: ignore[attr-defined]
    assert payload["runs"] == 4
    assert [(r["placement"], r["arrived_pct"]) for r in payload["table"]][:4] == [
        ("bestfit", 90.0), ("bestfit", 100.0), ("bestfit", 110.0), ("bestfit", 130.0),
    ]  # fmt: skip
    written = {p.name for p in out.iterdir()}
    assert {"allocation_rate.png", "fragmentation_rate.png", "power.png"} <= written
    assert {"curves.csv", "table.csv"} <= written
