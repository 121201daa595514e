"""``simulate --estimate-throughputs``: the estimation's counts in ``--json`` and in the
table; the flag refused in one line where it would be ignored."""

import json

from typer.testing import CliRunner

from gpumosaic.cli import app

runner = CliRunner()
ROUNDS = [
    "simulate", "--cluster", "v100:2,k80:2", "--workload", "gavel:jobs=4,rate=0,multigpu=off",
    "--mechanism", "rounds",
]  # fmt: skip


def test_json_and_table_report_the_estimation() -> None:
    result = runner.invoke(app, [*ROUNDS, "--policy", "fifo", "--estimate-throughputs", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["estimate_throughputs"] is True
    estimation = out["estimation"]
    assert estimation["profiled_jobs"] == 4 and estimation["estimated_entries"] == 8
    assert estimation["profiling_rounds"] >= 4
    table = runner.invoke(app, [*ROUNDS, "--policy", "fifo", "--estimate-throughputs"])
    assert "estimation: jobs profiled / profiling rounds" in table.stdout
    plain = runner.invoke(app, [*ROUNDS, "--policy", "fifo", "--json"])
    assert json.loads(plain.stdout)["estimation"] is None


def test_refused_in_one_line_where_it_would_be_ignored() -> None:
    for args in (
        ["simulate", "--cluster", "v100:2", "--policy", "fifo", "--estimate-throughputs"],
        [*ROUNDS, "--policy", "max_min_fairness_packed", "--estimate-throughputs"],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: --estimate-throughputs")
