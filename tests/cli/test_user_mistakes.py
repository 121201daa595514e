"""Every mistake a newcomer made in issue 15 is one line naming the flag, the value and
what is allowed, with exit status 2; nothing hangs, nothing is a traceback."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpumosaic.cli import app

runner = CliRunner()
SIM = ["simulate", "--cluster", "v100:4", "--workload", "gavel:jobs=5,rate=0"]


def one_line_error(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ([*SIM, "--gpus-per-node", "0"], "--gpus-per-node 0: must be >= 1"),
        ([*SIM, "--gpus-per-node", "-1"], "--gpus-per-node -1"),
        ([*SIM, "--seed", "-1"], "--seed -1: must be >= 0"),
        (["fill", "--seed", "-1"], "--seed -1"),
        (["compare", "--seeds", "-1"], "--seeds -1"),
        (["compare", "--seeds", "0-1", "--workers", "-3"], "--workers -3"),
        ([*SIM, "--policy", "max_min_fairness", "--round-s", "0"], "--round-s 0"),
        ([*SIM, "--policy", "fifo", "--round-s", "-1"], "--round-s -1"),
        ([*SIM, "--policy", "max_min_fairness", "--resolve-interval-s", "-5"], "-5"),
        (["simulate", "--cluster", "v100:4", "--workload", "gavel:jobs=10000000"], "200,000"),
        (["simulate", "--cluster", "v100:10000000", "--workload", "gavel:jobs=5"], "100,000"),
        ([*SIM, "--gpus-per-node", "3"], "v100:4 does not divide into servers of 3"),
        (
            ["simulate", "--cluster", "openb:gpu", "--gpus-per-node", "8", "--workload", "x.csv"],
            "--gpus-per-node 8",
        ),
        ([*SIM, "--mechanism", "rounds", "--policy", "sjf"], "--policy sjf: is a queue order"),
        ([*SIM, "--policy", "fifoo"], "did you mean 'fifo'"),
        ([*SIM, "--placement", "fgdd"], "--placement fgdd: unknown placement (did you mean"),
        ([*SIM, "--mechanism", "round"], "did you mean 'rounds'"),
        (["simulate", "--cluster", "v10:4", "--workload", "gavel:jobs=5"], "'V100'"),
        (["simulate", "--cluster", "v100:4", "--workload", "gavl:jobs=5"], "'gavel'"),
        (["simulate", "--cluster", "v100:4", "--workload", "openb:defaultt"], "'openb:default'"),
        ([*SIM, "--sharing", "gandiva:packing=maybe"], "--sharing"),
        ([*SIM, "--sharing", "nvsare"], "--sharing nvsare: unknown sharing model (did you mean"),
        ([*SIM, "--sharing", "parametric:busy=x"], "--sharing: interference option busy"),
    ],
)
def test_mistake_is_one_line_exit_2(args: list[str], words: str) -> None:
    assert words in one_line_error(args)


@pytest.mark.parametrize("command", [SIM, ["compare", "--seeds", "0"], ["fill"]])
def test_out_naming_a_file_is_refused_before_any_work(command: list[str], tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    line = one_line_error([*command, "--out", str(afile)])
    assert "--out" in line and "is a file" in line
    assert afile.read_text() == "keep me"


def test_overload_is_announced_with_the_offered_load() -> None:
    # A first guess of 1 job/h on 12 GPUs: Gavel's jobs average over 12 GPU-hours.
    result = runner.invoke(
        app, ["simulate", "--cluster", "v100:12", "--workload", "gavel:jobs=30,rate=1"]
    )
    assert result.exit_code == 0, result.output
    assert "offered load:" in result.output and "of 12 GPUs busy" in result.output
    assert "warning: offered load" in result.output and "queue grows" in result.output


def test_version_and_an_example_in_every_command_help() -> None:
    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0 and version.stdout.startswith("gpumosaic ")
    commands = [
        ["simulate"], ["compare"], ["fill"], ["serve"], ["submit"], ["jobs"], ["job"], ["logs"],
        ["cancel"], ["reproduce", "nvshare"], ["reproduce", "gavel"], ["reproduce", "gandiva"],
        ["reproduce", "gavel-openb"], ["extender"], ["extender", "replay"], ["share", "run"],
    ]  # fmt: skip
    for command in commands:
        help_text = runner.invoke(app, [*command, "--help"], terminal_width=200).stdout
        assert "Example: gpumosaic " + command[0] in help_text, command


def test_background_is_refused_where_it_would_be_ignored() -> None:
    line = one_line_error([*SIM, "--policy", "max_min_fairness", "--background", "openb:default"])
    assert "--background openb:default: background load needs the event mechanism" in line


def test_a_job_list_on_a_loaded_openb_cluster(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(
        "arrival_s,num_gpu,gpu_milli,duration_s,cpu_milli\n0,1,500,3600,4000\n60,2,1000,600,8000\n"
    )
    args = ["simulate", "--cluster", "openb:gpu", "--workload", str(jobs), "--json"]
    result = runner.invoke(app, [*args, "--background", "openb:default,fraction=0.6"])
    assert result.exit_code == 0, result.output
    import json

    summary = json.loads(result.stdout)
    assert summary["completed"] == 2
    assert summary["background_allocation"] == pytest.approx(0.6, abs=0.01)
    assert summary["utilization"] > 0.5  # the background holds its share all run long


@pytest.mark.slow
def test_compare_says_when_two_placements_decide_identically(tmp_path: Path) -> None:
    args = ["compare", "--placements", "bestfit,fgd", "--seeds", "0-1", "--out", str(tmp_path)]
    result = runner.invoke(app, [*args, "--workload", "gavel:jobs=12,rate=0,milli=spatial"])
    assert result.exit_code == 0, result.output
    assert "note: bestfit and fgd gave identical results on all 2 seeds" in result.output
    assert "every server has one GPU" in result.output


@pytest.mark.slow
def test_compare_several_sharing_models_in_one_command(tmp_path: Path) -> None:
    args = ["compare", "--placements", "fgd", "--seeds", "0", "--out", str(tmp_path), "--json"]
    sharing = ["--sharing", "none", "--sharing", "nvshare:tq=30"]
    result = runner.invoke(app, [*args, *sharing, "--workload", "gavel:jobs=12,rate=20"])
    assert result.exit_code == 0, result.output
    import json

    rows = json.loads(result.stdout)["rows"]
    assert [row["placement"] for row in rows] == ["fgd + none", "fgd + nvshare:tq=30"]
    header = (tmp_path / "runs.csv").read_text().splitlines()[0].split(",")
    assert {"sharing", "ftf_rho_max", "jain_index", "avg_jct_s"} <= set(header)


@pytest.mark.slow
def test_policy_sweep_rows_have_the_columns_of_a_placement_sweep(tmp_path: Path) -> None:
    out = tmp_path / "p"
    args = ["compare", "--policies", "max_min_fairness", "--rates", "4", "--seeds", "0"]
    result = runner.invoke(
        app, [*args, "--cluster", "v100:4", "--workload", "gavel:jobs=6", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    placement_run = runner.invoke(
        app, ["compare", "--placements", "fgd", "--seeds", "0", "--out", str(tmp_path / "s")]
    )
    assert placement_run.exit_code == 0, placement_run.output
    policy_header = (out / "policy_runs.csv").read_text().splitlines()[0]
    assert policy_header == (tmp_path / "s" / "runs.csv").read_text().splitlines()[0]
    assert ",fgd," in (out / "policy_runs.csv").read_text()  # simulate's default placement


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["compare", "--rates", "1,2"], "--rates '1,2': --rates sweeps the load"),
        (["compare", "--policies", "fifo", "--placements", "fgd,bestfit", "--rates", "1"], "one"),
        (
            ["compare", "--policies", "fifo", "--rates", "1", "--background", "openb:default"],
            "--background openb:default: background load is for placement comparisons",
        ),
    ],
)
def test_contradictory_compare_options(args: list[str], words: str) -> None:
    assert words in one_line_error(args)


def test_many_never_fitting_jobs_are_counted_not_listed(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("arrival_s,num_gpu,gpu_milli,duration_s\n" + "0,8,1000,60\n" * 25)
    result = runner.invoke(app, ["simulate", "--cluster", "v100:4", "--workload", str(jobs)])
    assert result.exit_code == 3
    rejected = [line for line in result.output.splitlines() if line.startswith("rejected:")]
    assert len(rejected) == 11 and "15 more jobs that no server can ever hold" in rejected[-1]


def test_jobs_csv_names_each_jobs_node_gpus_and_model(tmp_path: Path) -> None:
    args = ["simulate", "--cluster", "v100:8", "--gpus-per-node", "4", "--out", str(tmp_path)]
    result = runner.invoke(app, [*args, "--workload", "gavel:jobs=6,rate=0,milli=spatial"])
    assert result.exit_code == 0, result.output
    import csv

    rows = list(csv.DictReader((tmp_path / "jobs.csv").open()))
    assert len(rows) == 6 and all(row["gpu_model"] == "V100" for row in rows)
    assert all(row["node"] in ("0", "1") for row in rows)
    assert all(0 <= int(gpu) < 4 for row in rows for gpu in row["gpus"].split())
