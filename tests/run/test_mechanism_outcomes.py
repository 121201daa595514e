"""Seam tests: every mechanism on the same inputs ends every job with the same typed
outcome (never-fit jobs rejected as ``never_fits``, the rest completed), and the CLI
reports never-fit jobs the same way whichever mechanism ran."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpumosaic.cli import app
from gpumosaic.results.outcome import Outcome, RejectReason
from gpumosaic.run.build import run
from gpumosaic.run.description import RunDescription

runner = CliRunner()

# Row 2 asks for one GPU (fits), row 3 for 8 GPUs on one node (never fits v100:2).
JOBS = "arrival_s,num_gpu,gpu_milli,duration_s\n0,1,1000,10\n0,8,1000,10\n"
MECHANISMS = {"event": "fifo", "rounds": "max_min_fairness", "gandiva": "fifo"}


@pytest.fixture
def job_list(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.csv"
    path.write_text(JOBS)
    return path


@pytest.mark.parametrize("mechanism", ["event", "rounds", "gandiva"])
def test_never_fit_job_is_typed_rejected_under_every_mechanism(
    job_list: Path, mechanism: str
) -> None:
    outcome = run(
        RunDescription(
            cluster="v100:2",
            workload=str(job_list),
            mechanism=mechanism,
            policy=MECHANISMS[mechanism],
        )
    )
    by_id = {r.job_id: r for r in outcome.result.records}
    assert by_id[0].outcome is Outcome.COMPLETED
    assert by_id[1].outcome is Outcome.REJECTED
    assert by_id[1].rejection is RejectReason.NEVER_FITS
    assert len(outcome.never_fit_lines) == 1 and "row 3" in outcome.never_fit_lines[0]
    s = outcome.summary
    assert (s.completed, s.rejected, s.unfinished) == (1, 1, 0)


@pytest.mark.parametrize("mechanism", ["event", "rounds"])
def test_simulate_exits_3_on_a_never_fit_job_under_every_mechanism(
    job_list: Path, mechanism: str
) -> None:
    args = ["simulate", "--cluster", "v100:2", "--workload", str(job_list)]
    args += ["--mechanism", mechanism, "--policy", MECHANISMS[mechanism], "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 3, result.output
    summary = json.loads(result.stdout)
    assert (summary["completed"], summary["rejected"], summary["unfinished"]) == (1, 1, 0)
    assert "row 3" in result.stderr and "num_gpu" in result.stderr


@pytest.mark.parametrize("mechanism", ["event", "rounds", "gandiva"])
def test_every_job_ends_completed_rejected_or_unfinished_under_every_mechanism(
    mechanism: str,
) -> None:
    """The same stream (Gavel's generator, a measurement window that stops the run with
    jobs left) under each mechanism: every arrived job has one typed end, and the
    summary's counts are those of the records."""
    outcome = run(
        RunDescription(
            cluster="v100:2",
            workload="gavel:jobs=40,rate=40,window=0-10",
            mechanism=mechanism,
            policy=MECHANISMS[mechanism],
            seed=3,
        )
    )
    records = outcome.result.records
    ends = [r.outcome for r in records]
    s = outcome.summary
    assert s.jobs == len(records) == s.completed + s.rejected + s.unfinished
    assert s.unfinished > 0  # the window's end stops every mechanism with jobs left
    assert s.completed == ends.count(Outcome.COMPLETED)
    assert s.rejected == ends.count(Outcome.REJECTED)
    assert s.unfinished == sum(end.unfinished for end in ends)
    assert s.never_started == ends.count(Outcome.NEVER_STARTED)
    assert all((r.rejection is not None) == (r.outcome is Outcome.REJECTED) for r in records
               if mechanism != "gandiva")  # fmt: skip


def test_one_per_job_table_for_jobs_csv_and_studies() -> None:
    """``jobs.csv`` (experiments/store.py) and a study's jobs table
    (study/kinds/simulate.py) are one table: same columns, same values."""
    from gpumosaic.experiments.store import jobs_frame
    from gpumosaic.experiments.study.kinds.simulate import jobs_table

    outcome = run(RunDescription(cluster="v100:2", workload="gavel:jobs=6,rate=0"))
    frame = jobs_frame(outcome.result)
    table = jobs_table(outcome.result).to_pandas()
    assert list(frame.columns) == list(table.columns)
    assert {"outcome", "rejection", "reason", "node", "gpus", "parts"} <= set(frame.columns)
    assert frame.equals(table)
