"""Whether a job may span servers is the job's (JobSpec.may_span_nodes), and every
mechanism honours it: Gavel's jobs may, a pod from a job list may not unless it says so."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpumosaic.cli import app
from gpumosaic.results.result import JobStatus
from gpumosaic.run.build import run
from gpumosaic.run.description import RunDescription

runner = CliRunner()


def test_gavels_trace_runs_on_gavels_cluster_under_the_event_mechanism() -> None:
    """4-GPU jobs on Gavel's one-GPU servers: rejected as never_fits before (exit 3)."""
    trace = resources.files("gpumosaic") / "data" / "gavel" / "traces" / "minimize_makespan.trace"
    with resources.as_file(trace) as path:
        result = runner.invoke(
            app,
            [
                "simulate",
                "--cluster",
                "v100:8,p100:16,k80:24",
                "--workload",
                f"gavel-trace:{path}",
                "--policy",
                "fifo",
                "--placement",
                "strided",
                "--json",
            ],
        )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["rejected"] == 0 and summary["completed"] == 100


def _job_list(tmp_path: Path, span: str) -> Path:
    path = tmp_path / "jobs.csv"
    rows = ["arrival_s,num_gpu,duration_s,may_span_nodes", f"0,2,100,{span}", "0,1,50,false"]
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("mechanism", ["event", "rounds"])
def test_a_pod_never_spans_and_a_distributed_job_does(tmp_path: Path, mechanism: str) -> None:
    policy = "fifo" if mechanism == "event" else "max_min_fairness"
    for span, status in (("false", JobStatus.REJECTED), ("true", JobStatus.COMPLETED)):
        description = RunDescription(
            cluster="v100:3",
            workload=str(_job_list(tmp_path, span)),
            policy=policy,
            mechanism=mechanism,
        )
        records = {r.num_gpu: r for r in run(description).result.records}
        assert records[2].status is status, (span, records[2].reason)
        assert records[1].status is JobStatus.COMPLETED
        if status is JobStatus.COMPLETED:
            # Two one-GPU servers at once: it waits for nobody, so it ends at its duration
            # (the event mechanism; the rounds add their round granularity).
            assert records[2].finish_s - records[2].arrival_s == pytest.approx(
                100.0, abs=360.0 if mechanism == "rounds" else 1e-9
            )
