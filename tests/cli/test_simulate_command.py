"""``gpumosaic simulate`` and ``compare`` as a user calls them."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpumosaic.cli import app

runner = CliRunner()


def test_simulate_json_has_the_documented_keys(tmp_path: Path) -> None:
    out = tmp_path / "x"
    result = runner.invoke(
        app,
        [
            "simulate",
            "--cluster",
            "v100:4",
            "--workload",
            "gavel:jobs=12,rate=0,milli=spatial",
            "--policy",
            "fifo",
            "--placement",
            "fgd",
            "--seed",
            "0",
            "--out",
            str(out),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    for key in (
        "jobs",
        "completed",
        "avg_jct_s",
        "p50_jct_s",
        "p99_jct_s",
        "makespan_s",
        "utilization",
        "elapsed_s",
    ):
        assert key in summary
    assert summary["jobs"] == summary["completed"] == 12
    assert 0 < summary["utilization"] <= 1
    assert {p.name for p in out.iterdir()} >= {
        "jobs.csv",
        "summary.json",
        "run.png",
        "timeline.csv",
    }
    written = json.loads((out / "summary.json").read_text())
    assert written["avg_jct_s"] == summary["avg_jct_s"]


def test_parquet_output(tmp_path: Path) -> None:
    import pandas as pd

    result = runner.invoke(
        app,
        [
            "simulate",
            "--workload",
            "gavel:jobs=5,rate=10",
            "--out",
            str(tmp_path),
            "--format",
            "parquet",
        ],
    )
    assert result.exit_code == 0, result.output
    jobs = pd.read_parquet(tmp_path / "jobs.parquet")
    assert len(jobs) == 5 and set(jobs["status"]) == {"completed"}


def test_bad_job_list_is_one_line_naming_file_row_field(tmp_path: Path) -> None:
    path = tmp_path / "jobs.csv"
    path.write_text("arrival_s,num_gpu,gpu_milli,duration_s\n0,1,500,10\n0,1,abc,10\n")
    result = runner.invoke(app, ["simulate", "--workload", str(path)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1
    assert str(path) in result.output.replace("\n", "") or "jobs.csv" in lines[0]
    assert "row 3" in lines[0] and "gpu_milli" in lines[0]
    assert "Traceback" not in result.output


def test_never_fitting_job_is_rejected_counted_and_reported(tmp_path: Path) -> None:
    path = tmp_path / "jobs.csv"
    path.write_text("arrival_s,num_gpu,gpu_milli,duration_s\n0,1,500,10\n0,8,1000,10\n")
    result = runner.invoke(
        app, ["simulate", "--cluster", "v100:2", "--workload", str(path), "--json"]
    )
    assert result.exit_code == 3
    summary = json.loads(result.stdout)
    assert (summary["jobs"], summary["completed"], summary["rejected"]) == (2, 1, 1)
    assert "row 3" in result.stderr and "num_gpu" in result.stderr
    allowed = runner.invoke(
        app, ["simulate", "--cluster", "v100:2", "--workload", str(path), "--allow-rejects"]
    )
    assert allowed.exit_code == 0


def test_unknown_placement_and_model_are_user_errors() -> None:
    bad_model = runner.invoke(app, ["simulate", "--cluster", "h900:4"])
    assert bad_model.exit_code == 2 and "unknown GPU model" in bad_model.output
    bad_placement = runner.invoke(app, ["simulate", "--placement", "tetris"])
    assert bad_placement.exit_code == 2 and "tetris" in bad_placement.output
    bad_policy = runner.invoke(app, ["simulate", "--policy", "tetris"])
    assert bad_policy.exit_code == 2 and "--policy tetris: unknown policy" in bad_policy.output
    wrong_mechanism = runner.invoke(
        app, ["simulate", "--policy", "max_min_fairness", "--mechanism", "event"]
    )
    assert wrong_mechanism.exit_code == 2 and "queue order" in wrong_mechanism.output
    unmeasured = runner.invoke(app, ["simulate", "--cluster", "t4:4", "--workload", "gavel:jobs=3"])
    assert unmeasured.exit_code == 2 and "no rates for T4" in unmeasured.output


@pytest.mark.slow
def test_compare_writes_table_csv_and_figure(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            "compare",
            "--workload",
            "gavel:jobs=10,rate=0,milli=spatial",
            "--placements",
            "strided,fgd",
            "--seeds",
            "0-1",
            "--workers",
            "1",
            "--out",
            str(tmp_path),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert [row["placement"] for row in payload["rows"]] == ["worstfit", "fgd"]  # canonical
    assert payload["rows"][0]["seeds"] == 2
    assert (tmp_path / "runs.csv").read_text().count("\n") == 5  # header + 2 x 2 runs
    assert (tmp_path / "compare.png").stat().st_size > 0


def test_split_placements_keeps_weighted_combinations_whole() -> None:
    from gpumosaic.cli.compare.command import split_placements

    assert split_placements("fgd,pwr=200,fgd=800,bestfit") == ["fgd", "pwr=200,fgd=800", "bestfit"]


@pytest.mark.slow
def test_sharing_models_from_the_command_line() -> None:
    common = ["simulate", "--cluster", "v100:8", "--gpus-per-node", "4", "--json"]
    gandiva = runner.invoke(
        app,
        [
            *common,
            "--workload",
            "gavel:jobs=12,rate=30",
            "--sharing",
            "gandiva:packing=on,migration=on",
        ],
    )
    assert gandiva.exit_code == 0, gandiva.output
    assert json.loads(gandiva.stdout)["completed"] == 12
    nvshare = runner.invoke(
        app, [*common, "--workload", "gavel:jobs=12,rate=0", "--sharing", "nvshare:tq=30"]
    )
    assert nvshare.exit_code == 0, nvshare.output
    summary = json.loads(nvshare.stdout)
    assert summary["completed"] == 12 and summary["handovers"] > 0
    fractional = ["--workload", "gavel:jobs=8,rate=0,milli=spatial"]
    rounds = runner.invoke(
        app, [*common, *fractional, "--policy", "max_min_fairness", "--sharing", "capped"]
    )
    assert rounds.exit_code == 0, rounds.output
    assert json.loads(rounds.stdout)["completed"] == 8
    bad = runner.invoke(app, [*common, "--policy", "max_min_fairness", "--sharing", "nvshare:tq=0"])
    assert bad.exit_code == 2 and "--sharing" in bad.output


@pytest.mark.slow
def test_gandiva_takes_any_queue_order_and_any_placement() -> None:
    common = [
        "simulate",
        "--cluster",
        "v100:8,k80:4",
        "--gpus-per-node",
        "4",
        "--workload",
        "gavel:jobs=12,rate=30",
        "--sharing",
        "gandiva:packing=on,migration=on",
        "--json",
    ]
    runs = {}
    for extra in ([], ["--policy", "sjf"], ["--policy", "priority", "--placement", "bestfit"]):
        result = runner.invoke(app, [*common, *extra])
        assert result.exit_code == 0, result.output
        summary = json.loads(result.stdout)
        assert summary["completed"] == 12
        runs[(summary["policy"], summary["placement"])] = summary
    # No --placement under --sharing gandiva means Gandiva's own order, and says so.
    assert set(runs) == {("fifo", "affinity"), ("sjf", "affinity"), ("priority", "bestfit")}


def test_gandiva_refuses_an_allocation_policy_in_one_line() -> None:
    result = runner.invoke(
        app, ["simulate", "--sharing", "gandiva", "--policy", "max_min_fairness_perf"]
    )
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "--policy" in lines[0] and "queue order" in lines[0]
    assert "Traceback" not in result.output


def test_gandiva_refuses_the_rounds_mechanism_in_one_line() -> None:
    result = runner.invoke(app, ["simulate", "--sharing", "gandiva", "--mechanism", "rounds"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "--mechanism" in lines[0] and "Traceback" not in result.output


def test_affinity_placement_is_gandivas_only() -> None:
    result = runner.invoke(app, ["simulate", "--placement", "affinity"])
    assert result.exit_code == 2 and "--mechanism gandiva" in result.output
    default = runner.invoke(app, ["simulate", "--workload", "gavel:jobs=4,rate=0", "--json"])
    assert json.loads(default.stdout)["placement"] == "fgd"  # unchanged without gandiva


def test_openb_steady_state_command_borrows_rates_unless_told_not_to():
    """The Alibaba-scale study's command (docs/gavel.md), on a two-job window: models
    Gavel never measured take borrowed rates by default; borrow=off leaves them idle."""
    base = [
        "simulate", "--cluster", "openb:gpu", "--policy", "max_min_fairness_perf",
        "--placement", "fgd", "--seed", "0", "--json", "--workload",
    ]  # fmt: skip
    on = runner.invoke(app, [*base, "gavel:rate=120,window=0-2,milli=spatial"])
    off = runner.invoke(app, [*base, "gavel:rate=120,window=0-2,milli=spatial,borrow=off"])
    assert on.exit_code == 0, on.output
    assert off.exit_code == 0, off.output
    s_on = json.loads(on.stdout[on.stdout.index("{") :])
    s_off = json.loads(off.stdout[off.stdout.index("{") :])
    assert s_on["mechanism"] == "auto" and s_on["rounds"] > 0
    assert s_on["measured_jobs"] == 2 and s_off["measured_jobs"] == 2
    # Without borrowing only the measured models (V100, P100 columns) have rates, so a
    # job's expected alone time, and the offered load, average over other models.
    assert s_on["offered_load"] != s_off["offered_load"]
