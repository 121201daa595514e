"""One folder, one experiment (issue 36): an --out folder is locked while a command
writes it (a second command is refused in one line), and a folder holding another
experiment's runs is not written over unless --overwrite says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from gpumosaic.cli.app import app
from gpumosaic.cli.out_folder import locked_out

SRC = str(Path(__file__).resolve().parents[2] / "src")
TINY = ["compare", "--placements", "fgd", "--seeds", "0", "--workers", "1",
        "--workload", "gavel:jobs=4,rate=0"]  # fmt: skip


def one_line(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(app, args)
    lines = result.output.strip().splitlines()
    return result.exit_code, lines[-1] if lines else ""


def test_a_second_command_is_refused_while_a_folder_is_written(tmp_path: Path) -> None:
    with locked_out(tmp_path):  # as a first command holds it while it writes
        code, line = one_line([*TINY, "--out", str(tmp_path)])
        assert code == 2, line
        assert line == (
            f"error: --out {tmp_path}: another gpumosaic command (process {os.getpid()}) is "
            "writing this folder: wait for it to end or choose another folder"
        )
        # A real second process: the lock is the kernel's, across processes.
        proc = subprocess.run(
            [sys.executable, "-m", "gpumosaic", "run", "--preset", "nvshare",
             "--out", str(tmp_path)],
            capture_output=True, text=True, timeout=300,
            env={**os.environ, "PYTHONPATH": SRC},
        )  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        assert "another gpumosaic command" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert not (tmp_path / "experiment.toml").exists()  # the refused commands wrote nothing
    code, line = one_line([*TINY, "--out", str(tmp_path)])  # released: it runs
    assert code == 0, line


def test_a_folder_of_another_experiment_is_refused_unless_overwrite(tmp_path: Path) -> None:
    code, line = one_line([*TINY, "--out", str(tmp_path)])
    assert code == 0, line
    kept = list((tmp_path / "runs").glob("*/row.json"))  # the result store's runs
    assert len(kept) == 1
    other = [*TINY[:-1], "gavel:jobs=5,rate=0", "--out", str(tmp_path)]
    code, line = one_line(other)
    assert code == 2
    assert line == (
        f"error: --out {tmp_path}: holds another experiment's runs (experiment.toml differs): "
        "choose another folder, or add --overwrite to replace them"
    )
    assert "jobs=4" in (tmp_path / "experiment.toml").read_text()  # untouched
    code, line = one_line([*other, "--overwrite"])
    assert code == 0, line
    assert "jobs=5" in (tmp_path / "experiment.toml").read_text()
    assert not any(path in kept for path in (tmp_path / "runs").glob("*/row.json"))
    # The same experiment again is a rerun, not another experiment.
    code, line = one_line(other)
    assert code == 0, line


def test_run_refuses_a_folder_of_another_study(tmp_path: Path) -> None:
    def study(seed: int) -> Path:
        path = tmp_path / f"s{seed}.toml"
        path.write_text(
            f'[experiment]\nname = "s"\nkind = "simulate"\n\n[grid]\ncluster = "v100:2"\n'
            f'workload = "gavel:jobs=3,rate=0"\npolicy = "fifo"\nplacement = "fgd"\n'
            f"seed = {seed}\n"
        )
        return path

    out = tmp_path / "out"
    code, line = one_line(["run", str(study(0)), "--out", str(out), "--workers", "1"])
    assert code == 0, line
    code, line = one_line(["run", str(study(1)), "--out", str(out), "--workers", "1"])
    assert code == 2 and "holds another experiment's runs" in line and "--overwrite" in line
    code, line = one_line(
        ["run", str(study(1)), "--out", str(out), "--workers", "1", "--overwrite"]
    )
    assert code == 0, line
    assert len(list(out.glob("runs/*/row.json"))) == 1  # the other study's run is gone


def test_simulate_does_not_write_a_folder_another_command_holds(tmp_path: Path) -> None:
    with locked_out(tmp_path):
        code, line = one_line(["simulate", "--workload", "gavel:jobs=3,rate=0", "--out",
                               str(tmp_path)])  # fmt: skip
        assert code == 2 and "another gpumosaic command" in line, line
        assert not (tmp_path / "summary.json").exists()


def test_a_comparison_is_a_study_that_run_and_report_take_over(tmp_path: Path) -> None:
    """compare stores its runs in the folder's result store, background included (the
    simulate kind's background axis): gpumosaic run OUT/experiment.toml reuses every one,
    and the stored rows say what ran."""
    runner = CliRunner()
    compared = runner.invoke(
        app, ["compare", "--cluster", "v100:8", "--gpus-per-node", "4", "--workload",
              "gavel:jobs=6,rate=0", "--background", "openb:default,fraction=0.5",
              "--placements", "bestfit,fgd", "--seeds", "0", "--workers", "1",
              "--out", str(tmp_path), "--json"]
    )  # fmt: skip
    assert compared.exit_code == 0, compared.output
    rerun = runner.invoke(
        app, ["run", str(tmp_path / "experiment.toml"), "--out", str(tmp_path), "--json"]
    )
    assert rerun.exit_code == 0, rerun.output
    outcome = json.loads(rerun.output.strip().splitlines()[-1])
    assert (outcome["planned"], outcome["skipped"], outcome["ran"]) == (2, 2, 0)
    rows = pd.read_parquet(tmp_path / "runs.parquet")
    assert sorted(rows["placement"]) == ["bestfit", "fgd"]
    assert set(rows["background"]) == {"openb:default,fraction=0.5"}
    assert (rows["utilization"] > 0.5).all()  # the background holds half the GPUs
