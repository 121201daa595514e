"""The throw-away Slurm itself (tests/slurm_cluster.py): two nodes of two GPU types whose
typed GRES Slurm accounts for, and a job pinned to a node sees the GPU Slurm gave it."""

from __future__ import annotations

import pytest

from waiting import wait_for

pytestmark = pytest.mark.slow  # a real Slurm (started once per session)


def test_two_nodes_two_gpu_types_and_a_pinned_job(slurm, tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = slurm.run("sinfo", "-h", "-N", "-o", "%N %G").stdout.split()
    assert out == ["gm1", "gpu:v100:2", "gm2", "gpu:k80:2"]
    log = tmp_path / "out.txt"
    job = slurm.run(
        "sbatch", "--parsable", "--nodelist=gm2", "--gres=gpu:k80:1", "-o", str(log),
        "--wrap", "echo node=$SLURMD_NODENAME cuda=$CUDA_VISIBLE_DEVICES",
    ).stdout.strip()  # fmt: skip

    def state() -> str:
        return slurm.run("squeue", "-h", "-t", "all", "-j", job, "-o", "%T").stdout.strip()

    wait_for(state, 60, "the job to complete", until=lambda s: s == "COMPLETED")
    assert log.read_text().split() == ["node=gm2", "cuda=0"]
