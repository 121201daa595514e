"""``compare`` says how every row's jobs ended, warns when the compared runs completed
different jobs, and ``--common-jobs`` averages over the jobs every run completed."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from gpumosaic.cli import app
from gpumosaic.cli.compare.table import different_jobs_warning, table_rows
from gpumosaic.experiments.sweeps.runs import SweepRun
from gpumosaic.results.result import JobRecord, JobStatus, RunStats, SimResult, TimelineRecorder
from gpumosaic.results.summary import summarize
from gpumosaic.run.description import RunDescription

runner = CliRunner()


def _run(placement: str, jcts: dict[int, float], queued: tuple[int, ...] = ()) -> SweepRun:
    """A run whose jobs ``jcts`` completed (arrival 0) and ``queued`` never started."""
    done = [
        JobRecord(i, "", "t", 0.0, 0.0, jct, 1, 1000, JobStatus.COMPLETED, alone_s=jct)
        for i, jct in jcts.items()
    ]
    waiting = [
        JobRecord(i, "", "t", 0.0, math.nan, math.nan, 8, 1000, JobStatus.QUEUED) for i in queued
    ]
    recorder = TimelineRecorder()
    recorder.record(0.0, 0.0, 0, 0, math.nan, 0.0, 0.0)
    result = SimResult((*done, *waiting), recorder.freeze(), RunStats(), 8000, 100.0)
    request = RunDescription(cluster="v100:8", workload="gavel:jobs=3", placement=placement)
    ids = np.array(list(jcts), dtype=np.int64)
    jct = np.array(list(jcts.values()))
    return SweepRun(request, summarize(result), jct, result.timeline, ids)


def test_a_run_that_leaves_the_big_job_unstarted_is_named_and_common_jobs_compare_fairly() -> None:
    # bestfit completes all three (the 8-GPU job 2 takes 90 s); fgd never starts job 2.
    by_label = {
        "bestfit": [_run("bestfit", {0: 10.0, 1: 20.0, 2: 90.0})],
        "fgd": [_run("fgd", {0: 12.0, 1: 22.0}, queued=(2,))],
    }
    plain = {row["placement"]: row for row in table_rows(by_label)}
    assert plain["fgd"]["avg_jct_s_mean"] == 17.0 and plain["bestfit"]["avg_jct_s_mean"] == 40.0
    assert (plain["fgd"]["completed_mean"], plain["fgd"]["unfinished_mean"]) == (2, 1)
    assert (plain["bestfit"]["completed_mean"], plain["bestfit"]["unfinished_mean"]) == (3, 0)
    warning = different_jobs_warning(by_label)
    assert "bestfit 3, fgd 2" in warning and "--common-jobs" in warning
    common = {row["placement"]: row for row in table_rows(by_label, common_jobs=True)}
    assert common["bestfit"]["avg_jct_s_mean"] == 15.0 and common["fgd"]["avg_jct_s_mean"] == 17.0
    assert common["fgd"]["vs_bestfit_pct"] > 0 > plain["fgd"]["vs_bestfit_pct"]
    assert common["fgd"]["common_jobs_mean"] == 2
    same = {"a": [_run("bestfit", {0: 1.0})], "b": [_run("fgd", {0: 2.0})]}
    assert different_jobs_warning(same) == ""
    # With --common-jobs given, the warning says the averages are over the common jobs;
    # it does not suggest the option in use.
    given = different_jobs_warning(by_label, common_jobs=True)
    assert "over the 2 jobs every run completed (--common-jobs)" in given
    assert "averages over the jobs every run completed" not in given


@pytest.mark.slow  # a whole compare run over every mechanism: seconds of CPU
def test_compare_rows_carry_completed_rejected_unfinished(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("arrival_s,num_gpu,gpu_milli,duration_s\n0,1,500,10\n0,1,500,20\n0,8,1000,5\n")
    args = ["compare", "--cluster", "v100:2", "--workload", str(jobs), "--seeds", "0"]
    args += ["--placements", "bestfit,fgd", "--workers", "1", "--out", str(tmp_path / "c")]
    result = runner.invoke(app, [*args, "--json", "--common-jobs"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    assert [(r["completed_mean"], r["rejected_mean"], r["unfinished_mean"]) for r in rows] == [
        (2, 1, 0),
        (2, 1, 0),
    ]
    fill = runner.invoke(app, ["compare", "--mode", "fill", "--common-jobs"])
    assert fill.exit_code == 2 and "--common-jobs" in fill.output
