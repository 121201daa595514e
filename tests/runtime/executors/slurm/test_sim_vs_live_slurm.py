"""``sim-vs-live --executor slurm`` on the throw-away Slurm (2 V100 + 2 K80): three short
Gavel jobs run as Slurm batch jobs and in the simulator given Slurm's measured launch
latency; the JSON has Ray's keys and both sides finish every job. (Agreement is measured
outside the suite: docs/slurm.md.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpumosaic.cli import app

pytestmark = pytest.mark.slow  # a real Slurm (started once per session)

WORKLOAD = """\
jobs:
  - {arrival_s: 0, num_gpu: 1, job_type: A3C, steps: 1500}
  - {arrival_s: 0, num_gpu: 1, job_type: CycleGAN, steps: 1000}
  - {arrival_s: 0, num_gpu: 1, job_type: "ResNet-18 (batch size 64)", steps: 3000}
"""


def test_sim_vs_live_on_slurm_has_rays_keys(slurm, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    slurm.wait_quiet()  # what earlier tests left has ended
    workload = tmp_path / "jobs.yaml"
    workload.write_text(WORKLOAD)
    result = CliRunner().invoke(
        app,
        ["sim-vs-live", "--executor", "slurm", "--slurm-conf", str(slurm.conf),
         "--workload", str(workload), "--policy", "max_min_fairness_perf", "--round-s", "60",
         "--time-scale", "20", "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout[result.stdout.index("{") :])
    assert set(data) == {
        "sim", "live", "avg_jct_rel_diff", "makespan_rel_diff", "per_job_rel_diff_median",
        "per_job_rel_diff_p90", "rounds_identical", "time_scale", "wall_s",
    }  # fmt: skip
    assert data["live"]["finished"] is True
    assert data["sim"]["completed"] == data["live"]["completed"] == 3
    assert data["live"]["launches"] >= 3 and data["sim"]["launch_latency_s"] > 0
