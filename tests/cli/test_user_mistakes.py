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
    # 30 Gavel jobs at 1 job/h ask for ~460 GPU-h by ~100 h (the last one's finish): on 4
    # GPUs that is over 100%, and jobs do wait; on 12 GPUs it is ~38% and none waits.
    args = ["simulate", "--workload", "gavel:jobs=30,rate=1", "--json"]
    over = runner.invoke(app, [*args, "--cluster", "v100:4"])
    assert over.exit_code == 0, over.output
    assert "warning: offered load" in over.output and "so jobs queue" in over.output
    import json

    summary = json.loads(over.stdout)
    assert summary["offered_load"] > 1.0 and summary["avg_queueing_s"] > 3600
    under = runner.invoke(app, [*args, "--cluster", "v100:12"])
    assert under.exit_code == 0, under.output
    assert "warning" not in under.output
    summary = json.loads(under.stdout)
    assert summary["offered_load"] < 0.5 and summary["avg_queueing_s"] < 60
    table = runner.invoke(app, ["simulate", "--cluster", "v100:12", "--workload", args[2]])
    assert "offered load: 30 jobs arriving over" in table.output
    assert "of 12 GPUs busy" in table.output


def test_a_short_job_list_on_a_big_cluster_is_not_an_overload(tmp_path: Path) -> None:
    # Issue 28: 2 jobs arriving 10 s apart reported 29,250%; the load is what they ask
    # for by the time the last one would finish (here 2 GPU-h in about an hour, 8 GPUs).
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("arrival_s,num_gpu,gpu_milli,duration_s\n0,1,1000,3600\n10,1,1000,3600\n")
    result = runner.invoke(app, ["simulate", "--cluster", "v100:8", "--workload", str(jobs)])
    assert result.exit_code == 0, result.output
    assert "offered load: 2 jobs arriving over 0.0 h ask for 2.0 GPU-h by 1.0 h" in result.output
    assert "(25% of capacity)" in result.output and "warning" not in result.output


@pytest.mark.slow  # every command's help and example, each run: seconds of CPU
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


@pytest.mark.slow  # a simulation on the 6,212-GPU openb cluster: seconds of CPU
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
def test_contradictory_compare_options(
    args: list[str], words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the default --out (runs/...) is relative: not the checkout's
    assert words in one_line_error(args)


def test_many_never_fitting_jobs_are_counted_not_listed(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("arrival_s,num_gpu,gpu_milli,duration_s\n" + "0,8,1000,60\n" * 25)
    result = runner.invoke(app, ["simulate", "--cluster", "v100:4", "--workload", str(jobs)])
    assert result.exit_code == 3
    rejected = [line for line in result.output.splitlines() if line.startswith("rejected:")]
    assert len(rejected) == 11 and "15 more jobs that no server can ever hold" in rejected[-1]


@pytest.mark.slow  # a simulation on the openb cluster: seconds of CPU
def test_jobs_csv_names_each_jobs_node_gpus_and_model(tmp_path: Path) -> None:
    args = ["simulate", "--cluster", "v100:8", "--gpus-per-node", "4", "--out", str(tmp_path)]
    result = runner.invoke(app, [*args, "--workload", "gavel:jobs=6,rate=0,milli=spatial"])
    assert result.exit_code == 0, result.output
    import csv

    rows = list(csv.DictReader((tmp_path / "jobs.csv").open()))
    assert len(rows) == 6 and all(row["gpu_model"] == "V100" for row in rows)
    assert all(row["node"] in ("0", "1") for row in rows)
    assert all(0 <= int(gpu) < 4 for row in rows for gpu in row["gpus"].split())


# ---- issue 28: every path that cannot be written, every number that is not one -------

WRITERS = [
    SIM,
    ["compare", "--seeds", "0"],
    ["compare", "--mode", "fill", "--seeds", "0"],
    ["fill"],
    ["run", "--preset", "nvshare"],
    ["kernels"],
]


@pytest.mark.parametrize("command", WRITERS)
@pytest.mark.parametrize("where", ["under-a-file", "proc"])
def test_out_that_cannot_be_created_is_refused_before_any_work(
    command: list[str], where: str, tmp_path: Path
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    # Under a file, or in /proc (no folder can be made there, not even by root).
    out = afile / "sub" if where == "under-a-file" else Path("/proc/gpumosaic-test-out")
    line = one_line_error([*command, "--out", str(out)])
    assert line.startswith(f"error: --out {out}: cannot create or write this folder"), line
    assert afile.read_text() == "keep me"


def test_the_out_check_leaves_no_folder_behind(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b"
    # A mistake found after the --out check (an unknown policy) leaves nothing made.
    one_line_error([*SIM, "--out", str(out), "--policy", "fifoo"])
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ([*SIM, "--policy", "max_min_fairness", "--round-s", "inf"], "--round-s inf: must be a"),
        ([*SIM, "--policy", "max_min_fairness", "--resolve-interval-s", "inf"], "finite"),
        (["fill", "--inflate", "inf"], "--inflate inf: must be a finite number > 0 and <= 10"),
        (["fill", "--inflate", "nan"], "--inflate nan"),
        (["fill", "--inflate", "1e9"], "--inflate 1000000000.0"),
        (["compare", "--mode", "fill", "--inflate", "nan"], "--inflate nan"),
        (["compare", "--policies", "fifo", "--rates", "nan"], "--rates nan: must be a finite"),
        (["compare", "--policies", "fifo", "--rates", "1,inf"], "--rates inf"),
        (["compare", "--workers", "100000"], "--workers 100000: must be 1..1024"),
        (["simulate", "--workload", "gavel:jobs=5,rate=nan"], "rate: expected a finite number"),
        (["simulate", "--workload", "gavel:jobs=5,rate=inf"], "rate: expected a finite number"),
        (["simulate", "--workload", "openb:default,compress=inf"], "compress: expected a fin"),
        ([*SIM, "--sharing", "nvshare:tq=inf"], "tq: expected a finite number"),
        ([*SIM, "--sharing", "parametric:alpha=inf"], "alpha: expected a finite number"),
        ([*SIM, "--sharing", "gandiva:quantum=inf"], "quantum: expected a finite number"),
        (["simulate", "--workload", "gavel:jobs=5,rat=1"], "'rat' is not an option (did you"),
        ([*SIM, "--sharing", "nvshare:tqq=30"], "(did you mean 'tq'?)"),
    ],
)
def test_a_number_that_is_not_finite_or_absurd_is_one_line(args: list[str], words: str) -> None:
    assert words in one_line_error(args)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("arrival_s,num_gpu,duration_s\ninf,1,60\n", "row 2, field 'arrival_s': Input should be"),
        ("arrival_s,num_gpu,duration_s\n0,1,nan\n", "row 2, field 'duration_s'"),
        ("arrival_s,num_gpu,duration_s\n0,1,1e300\n", "row 2, field 'duration_s'"),
        ("arrival_s,num_gpu,duration_s\n0,1,60\n0,1e12,60\n", "row 3, field 'num_gpu'"),
        ("arrival_s,num_gpu,duration_s,cpu_milli\n0,1,60,1e30\n", "field 'cpu_milli'"),
        ("arrival_s,num_gpu,duratoin_s\n0,1,60\n", "unknown column 'duratoin_s' (did you mean"),
        ("arrival_s,num_gpu,steps,job_type\n0,1,60,A3D\n", "unknown job type 'A3D' (did you mean"),
    ],
)
def test_job_list_numbers_and_names(text: str, words: str, tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(text)
    line = one_line_error(["simulate", "--cluster", "v100:4", "--workload", str(jobs)])
    assert str(jobs) in line and words in line


def test_a_yaml_job_list_key_gets_did_you_mean(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("jobs:\n  - {arrival_s: 0, num_gpu: 1, duratoin_s: 5}\n")
    line = one_line_error(["simulate", "--workload", str(jobs)])
    assert "row 1, field 'duratoin_s': unknown key (did you mean 'duration_s'?)" in line


@pytest.mark.parametrize(
    ("grid", "words"),
    [
        ('plicy = "fifo"', "line 7, key 'grid.plicy': unknown key (did you mean 'policy'?)"),
        ("round_s = inf", "key 'grid.round_s': must be a finite number (got inf)"),
        ("round_s = nan", "key 'grid.round_s': must be a finite number (got nan)"),
        ("seed = [0, 1e400]", "key 'grid.seed[1]': must be a finite number"),
    ],
)
def test_a_study_file_key_misspelt_or_number_not_finite(
    grid: str, words: str, tmp_path: Path
) -> None:
    study = tmp_path / "study.toml"
    study.write_text(
        '[experiment]\nname = "x"\n\n[grid]\ncluster = "v100:4"\n'
        f'workload = "gavel:jobs=5"\n{grid}\n'
    )
    line = one_line_error(["run", str(study), "--out", str(tmp_path / "o")])
    assert str(study) in line and words in line


def test_a_study_kind_misspelt_gets_did_you_mean(tmp_path: Path) -> None:
    study = tmp_path / "study.toml"
    study.write_text('[experiment]\nname = "x"\nkind = "simulat"\n[grid]\n')
    assert "unknown kind (did you mean 'simulate'?)" in one_line_error(["run", str(study)])


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ["simulte"],
            "No such command 'simulte'. Did you mean 'simulate', 'emulate'?; see gpumosaic --help",
        ),
        (["reproduce", "nvshar"], "Did you mean 'nvshare'?; see gpumosaic reproduce --help"),
        (["simulate", "--clustr", "v100:4"], "No such option: --clustr"),
        (["simulate", "--seed", "x"], "Invalid value for '--seed'"),
        (["query"], "Missing argument 'folder'; see gpumosaic query --help"),
        (["fill", "--json", "extra"], "unexpected extra argument"),
    ],
)
def test_a_usage_mistake_is_one_line_not_a_box(args: list[str], words: str) -> None:
    # Issue 28: typer drew these as a box of several lines. (Exit codes of the commands
    # themselves still pass through: test_many_never_fitting_jobs_are_counted_not_listed.)
    assert words in one_line_error(args)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ["compare", "--executor", "rey"],
            "--executor rey: unknown executor (did you mean 'ray'?)",
        ),
        (["run", "--preset", "nvshare", "--executor", "rey"], "(did you mean 'ray'?)"),
        (["compare", "--mode", "fil"], "--mode fil: unknown mode (did you mean 'fill'?)"),
    ],
)
def test_unknown_names_get_did_you_mean(args: list[str], words: str, tmp_path: Path) -> None:
    line = one_line_error([*args, "--out", str(tmp_path / "o")])
    assert words in line
    assert not (tmp_path / "o").exists()  # refused before the experiment file is written


def test_an_unknown_job_type_is_refused_where_jobs_are_submitted() -> None:
    # Issue 28: `gpumosaic submit --job-type` accepted any name (the job got no prior).
    from pydantic import ValidationError

    from gpumosaic.runtime.jobs.submission import JobSubmission

    JobSubmission(command="true", steps=5, job_type="A3C")
    with pytest.raises(ValidationError, match=r"unknown job type 'A3D' \(did you mean 'A3C'\?\)"):
        JobSubmission(command="true", steps=5, job_type="A3D")
    with pytest.raises(ValidationError, match="finite number"):
        JobSubmission(command="true", steps=float("inf"))


def test_a_job_type_label_in_a_duration_list_is_checked_too(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("arrival_s,num_gpu,duration_s,job_type\n0,1,60,A3C\n0,1,60,ResNet-5O\n")
    line = one_line_error(["simulate", "--workload", str(jobs)])
    assert "row 3, field 'job_type': unknown job type 'ResNet-5O'" in line


# Issue 28: a mistake inside a spec string is refused by a quick check (plain Python, no
# numpy: tests/cli/test_startup_imports.py) that is the build's own parser, so the line is
# the one the build gives, as it was before the quick check existed.
SPEC_LINES = [
    ("--cluster", "v100:x", "--cluster: cluster part 'v100:x' is not MODEL:COUNT (e.g. v100:4)"),
    ("--cluster", "h100:4", "--cluster: unknown GPU model 'h100' (did you mean 'V100'?)"),
    (
        "--placement",
        "fgdd",
        "--placement fgdd: unknown placement (did you mean 'fgd'?); known: random, dotprod",
    ),
    ("--placement", "pwr=x,fgd", "--placement 'pwr=x,fgd': weight of 'pwr' is not a number"),
    ("--placement", "random=1,fgd", "--placement 'random=1,fgd': 'random' cannot be combined"),
    ("--sharing", "nvshare:tq=-1", "--sharing: nvshare option: tq must be a positive number"),
    (
        "--sharing",
        "capd",
        "--sharing capd: unknown sharing model (did you mean 'capped'?); known: none, "
        "parametric, measured, capped, nvshare, gandiva",
    ),
    (
        "--sharing",
        "parametric:alpha=-1",
        "--sharing: alpha must be >= 0, got -1.0 in 'parametric:alpha=-1'",
    ),
    ("--sharing", "capped:x=1", "--sharing: 'capped' takes no options"),
    (
        "--sharing",
        "gandiva:packing=maybe",
        "--sharing: gandiva option packing: expected on or off (or true/false, yes/no, 1/0), "
        "got 'maybe'",
    ),
    (
        "--workload",
        "gavel:jobs=abc",
        "--workload: gavel workload option jobs: expected a whole number, got 'abc'",
    ),
    ("--workload", "gavel:jobs=0", "--workload: gavel workload: jobs must be >= 1"),
    (
        "--workload",
        "gavel-stream:rate=3",
        "--workload: gavel-stream option: gavel-stream needs window=A-B and a rate",
    ),
    (
        "--workload",
        "openb:default,compress=0",
        "--workload: openb option: compress must be a positive number, got 0.0",
    ),
]


def _built_line(flag: str, value: str) -> str:
    """The line of the error the build's own function raises for ``flag value``."""
    from gpumosaic.errors import InputError
    from gpumosaic.mechanisms.gandiva.plugin import GandivaMechanism
    from gpumosaic.model.job import JobSpec
    from gpumosaic.placement.workload import TargetWorkload
    from gpumosaic.run.parts import build_placement_for
    from gpumosaic.sharing.speed import build_speed_model
    from gpumosaic.workloads.spec import parse_cluster, parse_workload

    target = TargetWorkload.from_jobs([JobSpec(0, 0.0, "probe", 1, 1000, 1.0)])
    build = {
        "--cluster": lambda: parse_cluster(value),
        "--placement": lambda: build_placement_for(value, target),
        "--workload": lambda: parse_workload(value, 0),
        "--sharing": lambda: (
            GandivaMechanism().sharing(RunDescriptionStub(value))
            if value.startswith("gandiva")
            else build_speed_model(value)
        ),
    }[flag]
    with pytest.raises(InputError) as built:
        build()
    return f"error: {built.value}"


class RunDescriptionStub:
    """What ``GandivaMechanism.sharing`` reads of a description."""

    def __init__(self, sharing: str) -> None:
        self.sharing = sharing


@pytest.mark.parametrize(("flag", "value", "line"), SPEC_LINES, ids=lambda v: str(v)[:24])
def test_a_spec_mistake_is_the_builds_own_line(flag: str, value: str, line: str) -> None:
    shown = one_line_error([*SIM, flag, value])
    assert shown.startswith(f"error: {line}")
    assert shown == _built_line(flag, value)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--cluster", "v100:x"], "error: --cluster: cluster part 'v100:x' is not MODEL:COUNT"),
        (["--placements", "fgdd"], "error: --placements fgdd: unknown placement (did you mean"),
        (["--sharing", "nvshare:tq=-1"], "error: --sharing: nvshare option: tq must be a posi"),
        (["--workload", "gavel:jobs=abc"], "error: --workload: gavel workload option jobs: exp"),
        (["--policies", "nosuch", "--rates", "1"], "error: --policies nosuch: unknown policy"),
        (["--policies", "fifo", "--rates", "1", "--placements", "fgdd"], "--placements fgdd"),
        (["--mode", "fill", "--placements", "fgdd"], "error: --placements fgdd: unknown place"),
        (["--sharing", "gandiva", "--placements", "affinity,nosuch"], "--placements nosuch"),
    ],
)
def test_compare_refuses_a_spec_before_the_experiment_file(
    args: list[str], line: str, tmp_path: Path
) -> None:
    assert line in one_line_error(["compare", *args, "--out", str(tmp_path / "o")])
    assert not (tmp_path / "o").exists()  # nothing made, nothing written, nothing run


LIVE = ["sim-vs-live", "--policy", "fifo"]


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["serve", "--cluster", "v100:x"], "error: --cluster: cluster part 'v100:x' is not"),
        (["serve", "--placement", "fgdd"], "error: --placement fgdd: unknown placement (did"),
        (["serve", "--policy", "fifoo"], "error: --policy fifoo: unknown policy (did you mean"),
        (["extender", "--placement", "fgdd"], "error: --placement fgdd: unknown placement"),
        (["extender", "--cluster", "v100:x"], "error: --cluster: cluster part 'v100:x' is not"),
        (["extender", "replay", "--placement", "fgdd"], "error: --placement fgdd: unknown"),
        (["fill", "--placement", "pwr=0,fgd"], "error: --placement 'pwr=0,fgd': weight of 'pwr'"),
        (
            [
                "sim-vs-live",
                "--cluster",
                "v100:2",
                "--workload",
                "gavel:jobs=x",
                "--policy",
                "fifo",
            ],
            "error: --workload: gavel workload option jobs: expected a whole number, got 'x'",
        ),
        (
            [
                "sim-vs-live",
                "--cluster",
                "v100:x",
                "--workload",
                "gavel:jobs=3",
                "--policy",
                "fifo",
            ],
            "error: --cluster: cluster part 'v100:x' is not MODEL:COUNT",
        ),
    ],
)
def test_every_command_refuses_a_spec_in_one_line(args: list[str], line: str) -> None:
    assert line in one_line_error(args)


def test_the_suggestion_for_an_unknown_command_does_not_depend_on_what_ran_before() -> None:
    # click suggests from the commands loaded so far; a command run earlier in the same
    # process (here: simulate's help) must not narrow the suggestion to itself.
    assert runner.invoke(app, ["simulate", "--help"]).exit_code == 0
    line = one_line_error(["simulte"])
    assert "Did you mean 'simulate', 'emulate'?" in line, line
