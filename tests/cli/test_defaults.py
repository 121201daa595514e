"""Issue 28's confusing defaults: each kind of comparison has its own default folder, and
the report's rerun line writes where it says and reruns only what the folder lacks."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpumosaic.cli import app

runner = CliRunner()

NODES = "sn,cpu_milli,memory_mib,gpu,model\nn0,32000,65536,2,T4\nn1,64000,65536,4,V100M16\n"
TASKS = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,4000,1024,1,500\np1,8000,1024,2,1000\n"


@pytest.mark.slow  # two whole compare runs: seconds of CPU
def test_placement_and_fill_comparisons_write_different_default_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "tasks.csv").write_text(TASKS)
    placements = ["compare", "--placements", "fgd", "--seeds", "0", "--workers", "1"]
    sim = runner.invoke(app, [*placements, "--workload", "gavel:jobs=4,rate=0"])
    assert sim.exit_code == 0, sim.output
    fill = runner.invoke(
        app,
        [*placements, "--mode", "fill", "--tasks", "tasks.csv", "--nodes", "nodes.csv"],
    )
    assert fill.exit_code == 0, fill.output
    assert (tmp_path / "runs" / "compare" / "runs.csv").is_file()
    assert (tmp_path / "runs" / "compare-fill" / "table.csv").is_file()
    assert not (tmp_path / "runs" / "compare" / "table.csv").exists()  # nothing mixed
    sweep = ["compare", "--policies", "max_min_fairness", "--rates", "4", "--seeds", "0"]
    policies = runner.invoke(app, [*sweep, "--cluster", "v100:4", "--workload", "gavel:jobs=4"])
    assert policies.exit_code == 0, policies.output
    assert (tmp_path / "runs" / "compare-policies" / "policy_runs.csv").is_file()


STUDY = """[experiment]
name = "hint"
[grid]
cluster = "v100:4"
workload = "gavel:jobs=4,rate=0,milli=spatial"
placement = ["fgd", "bestfit"]
seed = "0-1"
"""


@pytest.mark.slow  # a whole compare run, then its rerun: seconds of CPU
def test_the_reports_rerun_line_writes_there_and_skips_stored_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("plotly")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hint.toml").write_text(STUDY)
    out = tmp_path / "results"
    first = runner.invoke(app, ["run", "hint.toml", "--out", str(out), "--json"])
    assert first.exit_code == 0, first.output
    report = runner.invoke(app, ["report", str(out)])
    assert report.exit_code == 0, report.output
    html = (out / "report.html").read_text()
    hint = re.search(r"\(rerun: (gpumosaic run [^:]+):", html)
    assert hint is not None, "no rerun line in the report"
    argv = shlex.split(hint.group(1).replace("\n", " "))
    assert argv[-2:] == ["--out", str(out)]
    rerun = runner.invoke(app, [*argv[1:], "--json"])
    assert rerun.exit_code == 0, rerun.output
    outcome = json.loads(rerun.stdout)
    assert (outcome["out"], outcome["planned"], outcome["skipped"], outcome["ran"]) == (
        str(out),
        4,
        4,
        0,
    )
    assert not (tmp_path / "runs").exists()  # nothing written to runs/NAME
