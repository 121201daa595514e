"""Running a study: stored run by run, resumed without rerunning finished runs, and the
same numbers as the commands the runs stand for."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest
from study_builders import TINY_NVSHARE, TINY_SIMULATE, experiment

from gpumosaic.experiments.runner import run_request
from gpumosaic.experiments.study.execute import execute
from gpumosaic.experiments.study.kinds.simulate import run_description


def test_store_holds_runs_table_tables_and_descriptions(tmp_path: Path) -> None:
    study = experiment(tmp_path, TINY_SIMULATE)
    outcome = execute(study, tmp_path / "out", workers=1)
    assert (outcome.planned, outcome.skipped, outcome.ran, outcome.failed) == (4, 0, 4, ())
    runs = pd.read_parquet(tmp_path / "out" / "runs.parquet")
    assert sorted(runs["run_id"]) == sorted(r.run_id for r in study.runs())
    assert {"placement", "seed", "cluster", "avg_jct_s", "utilization"} <= set(runs.columns)
    for planned in study.runs():
        folder = tmp_path / "out" / "runs" / planned.run_id
        description = json.loads((folder / "run.json").read_text())
        assert description["request"]["placement"] == planned.point.placement
        jobs = pq.read_table(folder / "jobs.parquet").to_pandas()
        assert len(jobs) == 6 and set(jobs["run_id"]) == {planned.run_id}
        assert (jobs["node"] >= 0).all()  # the event simulator records placements
        placements = pq.read_table(folder / "placements.parquet").to_pandas()
        assert set(placements["job_id"]) == set(jobs["job_id"])
        assert (placements["milli"] <= 1000).all()
        # The stored summary is what simulate's own path gives for this point.
        summary = run_request(run_description(planned.point)).summary
        row = runs[runs["run_id"] == planned.run_id].iloc[0]
        assert row["avg_jct_s"] == summary.avg_jct_s
        assert row["makespan_s"] == summary.makespan_s


def test_a_rerun_skips_finished_runs_and_redoes_unfinished_ones(tmp_path: Path) -> None:
    study = experiment(tmp_path, TINY_NVSHARE)
    out = tmp_path / "out"
    first = execute(study, out)
    assert (first.ran, first.skipped) == (6, 0)
    before = {p.name: p.stat().st_mtime_ns for p in (out / "runs").glob("*/row.json")}
    again = execute(study, out)
    assert (again.ran, again.skipped) == (0, 6)
    after = {p.name: p.stat().st_mtime_ns for p in (out / "runs").glob("*/row.json")}
    assert before == after  # nothing rewritten
    # A run killed before its row was written counts as unfinished and runs again.
    victim = study.runs()[2].run_id
    (out / "runs" / victim / "row.json").unlink()
    third = execute(study, out)
    assert (third.ran, third.skipped) == (1, 5)
    assert len(pd.read_parquet(out / "runs.parquet")) == 6


def test_parallel_workers_store_the_same_numbers(tmp_path: Path) -> None:
    study = experiment(tmp_path, TINY_NVSHARE)
    execute(study, tmp_path / "serial", workers=1)
    execute(study, tmp_path / "pool", workers=2)
    a = pd.read_parquet(tmp_path / "serial" / "runs.parquet").sort_values("run_id")
    b = pd.read_parquet(tmp_path / "pool" / "runs.parquet").sort_values("run_id")
    pd.testing.assert_series_equal(a["total_s"].reset_index(drop=True),
                                   b["total_s"].reset_index(drop=True))  # fmt: skip


def test_a_run_that_fails_is_reported_and_not_stored(tmp_path: Path) -> None:
    # A job list gone between the file's check and the runs: they fail, none is stored.
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("arrival_s,num_gpu,duration_s\n0,1,60\n")
    text = TINY_SIMULATE.replace(
        'workload = "gavel:jobs=6,rate=0,milli=spatial"', f'workload = "{jobs}"'
    )
    checked = experiment(tmp_path, text)
    jobs.unlink()
    outcome = execute(checked, tmp_path / "out")
    assert outcome.ran == 0 and len(outcome.failed) == 4
    assert f"{jobs}: no such file" in outcome.failed[0].error
    assert not list((tmp_path / "out" / "runs").glob("*/row.json"))


def test_a_missing_job_list_is_refused_with_the_file(tmp_path: Path) -> None:
    from gpumosaic.errors import InputError

    text = TINY_SIMULATE.replace(
        'workload = "gavel:jobs=6,rate=0,milli=spatial"', 'workload = "/nonexistent/jobs.csv"'
    )
    with pytest.raises(InputError, match=r"key 'grid.workload': /nonexistent/jobs.csv: no such"):
        experiment(tmp_path, text)


def test_points_are_checked_by_the_run_description(tmp_path: Path) -> None:
    from gpumosaic.errors import InputError

    extra = 'seed = "0-1"\nsharing = "gandiva"\npolicy = "max_min_fairness"'
    text = TINY_SIMULATE.replace('seed = "0-1"', extra)
    with pytest.raises(InputError) as info:
        experiment(tmp_path, text)
    # RunDescription's mechanism check names --policy: the grid key policy, on its line.
    line = text.splitlines().index('policy = "max_min_fairness"') + 1
    assert f"line {line}, key 'grid.policy'" in str(info.value)


def test_report_view_shows_the_current_file_and_counts_older_runs(tmp_path: Path) -> None:
    from gpumosaic.experiments.report.view import load_view

    out = tmp_path / "out"
    execute(experiment(tmp_path, TINY_NVSHARE), out)
    smaller = TINY_NVSHARE.replace('job = ["small_50", "big_50"]', 'job = "small_50"')
    outcome = execute(experiment(tmp_path, smaller), out)
    assert (outcome.skipped, outcome.ran) == (3, 0)  # its runs were all stored already
    view = load_view(out)
    assert len(view.runs) == 3 and view.others == 3
    assert len(pd.read_parquet(out / "runs.parquet")) == 6  # all stay queryable


JOB_LIST_STUDY = """\
[experiment]
name = "job-list"
kind = "simulate"

[grid]
cluster = "v100:2"
workload = "{jobs}"
placement = ["bestfit", "fgd"]
"""


def test_a_run_stored_from_an_older_job_list_runs_again(tmp_path: Path) -> None:
    """A rerun reuses a stored run only while the files its point names are unchanged
    (size and time of change); it says how many it reused and how many it runs again."""
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("name,arrival_s,num_gpu,gpu_milli,duration_s\na,0,1,500,600\nb,0,1,500,60\n")
    study = experiment(tmp_path, JOB_LIST_STUDY.format(jobs=jobs))
    said: list[str] = []
    execute(study, tmp_path / "out", announce=said.append)
    again = execute(study, tmp_path / "out", announce=said.append)
    assert (again.skipped, again.ran) == (2, 0)
    assert said == [f"reusing 2 of 2 runs stored in {tmp_path / 'out'}; running the other 0"]
    jobs.write_text(jobs.read_text() + "c,0,1,1000,60\n")
    changed = execute(study, tmp_path / "out", announce=said.append)
    assert (changed.skipped, changed.ran) == (0, 2)
    assert said[-1].endswith("running the other 2 (2 stored from older input files run again)")
    rows = pd.read_parquet(tmp_path / "out" / "runs.parquet")
    assert set(rows["jobs"]) == {3} and "inputs" not in rows.columns


def test_a_background_axis_leaves_the_ids_of_runs_without_one_as_they_were() -> None:
    import hashlib
    from dataclasses import asdict, replace

    from gpumosaic.experiments.study.kinds.base import run_id

    point = experiment_point()
    before = {k: v for k, v in asdict(point).items() if k != "background"}  # as stored then
    payload = json.dumps({"kind": "simulate", **before}, sort_keys=True, default=str)
    assert run_id("simulate", point) == hashlib.sha1(payload.encode()).hexdigest()[:12]
    filled = replace(point, background="openb:default,fraction=0.5")
    assert run_id("simulate", filled) != run_id("simulate", point)
    assert run_description(filled).background == "openb:default,fraction=0.5"


def experiment_point() -> Any:
    from gpumosaic.experiments.study.kinds.simulate import SimulatePoint

    return SimulatePoint("v100:2", "gavel:jobs=2", "fifo", "fgd", 0, 1, "auto", True, 360.0,
                         1920.0, "none", None)  # fmt: skip
