"""bench/gpu_check_live.py on a machine without a GPU: its arguments, its dry path (the
sim-vs-live plan for real PyTorch jobs, built by the code the check runs) and its clean
skip. The check itself needs PyTorch on a CUDA GPU."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from gpumosaic.experiments.sim_vs_live.rounds import rounds_description
from gpumosaic.run.build import build_parts
from gpumosaic.run.description import RunDescription

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "gpu_check_live.py"


@pytest.fixture(scope="module")
def check() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_check_live", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check_live"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_dry_run_plans_real_jobs_at_the_rate_given(
    check: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    check.main(["--dry-run", "--jobs", "3", "--job-s", "30", "--assume-rate", "200"])
    plan = json.loads(capsys.readouterr().out)
    assert plan["description"]["cluster"] == "A100:1"
    assert plan["description"]["mechanism"] == "rounds"
    assert [j["duration_s"] for j in plan["jobs"]] == [30.0, 45.0, 60.0]
    steps = [s["steps"] for s in plan["submissions"]]
    assert steps == [6000.0, 9000.0, 12000.0]  # duration x the measured rate
    for sub in plan["submissions"]:
        assert sub["command"].endswith("examples/pytorch_train.py")
        assert sub["job_type"] == ""  # no Gavel type: its rate is measured


def test_the_job_list_is_what_the_simulator_reads(check: ModuleType, tmp_path: Path) -> None:
    args = check.parse_args(["--jobs", "2", "--job-s", "10"])
    rows = check.job_list(args, 123.0, tmp_path / "jobs.csv")
    description = check.description_for(args, tmp_path / "jobs.csv")
    assert isinstance(description, RunDescription)
    parts = build_parts(rounds_description(description))
    jobs = list(parts.workload.jobs)
    assert [j.work for j in jobs] == pytest.approx([r["duration_s"] for r in rows])
    submitter = check.RealJobs("python examples/pytorch_train.py", 123.0)
    assert [submitter.submission(j, 60.0).steps for j in jobs] == [1230.0, 1845.0]


@pytest.mark.parametrize(
    "args", [["--jobs", "0"], ["--job-s", "-1"], ["--model", "H999"], ["--check", "both"]]
)
def test_bad_arguments_exit_2(check: ModuleType, args: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        check.parse_args(args)
    assert exit_.value.code == 2


def test_without_torch_or_a_gpu_it_says_so_and_stops(
    check: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    if check.missing_gpu() is None:
        pytest.skip("this machine has PyTorch and a GPU: the check would run")
    check.main(["--check", "sim-vs-live"])
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("skipped: ") and "CUDA GPU" in out[0]
