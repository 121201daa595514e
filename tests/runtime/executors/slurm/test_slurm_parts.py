"""The Slurm executor's parts that need no Slurm: reading ``sinfo``'s nodes and GRES, the
batch job's runner, and ``serve --executor slurm``'s options (each mistake one line)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gpumosaic.errors import InputError
from gpumosaic.run.serve_description import ServeDescription
from gpumosaic.runtime.executors.slurm.cluster import SlurmNode, parse_gres, read_nodes
from gpumosaic.runtime.executors.slurm.rank import exit_path, main


def test_typed_gpus_are_read_from_gres() -> None:
    assert parse_gres("gpu:v100:2,gpu:k80:1(S:0),shard:8,gpu:3,(null)") == (
        ("v100", 2),
        ("k80", 1),
    )


class FakeCommands:
    def __init__(self, out: str) -> None:
        self.out = out
        self.argv: list[str] = []

    def run(self, argv: list[str], **_: object) -> str:
        self.argv = argv
        return self.out


def test_nodes_up_and_away() -> None:
    out = (
        "gm1|127.0.0.1|gpu:v100:2|idle\ngm2|127.0.0.1|gpu:k80:2|down*\n"
        "gm1|127.0.0.1|gpu:v100:2|idle\ncpu1|10.0.0.1|(null)|idle\n"
        "gm3|10.0.0.2|gpu:a100:1|drained\ngm4|10.0.0.3|gpu:v100:1|idle*\n"
    )
    nodes = read_nodes(FakeCommands(out), "gm")  # type: ignore[arg-type]
    assert [(n.name, n.up) for n in nodes] == [
        ("gm1", True),
        ("gm2", False),
        ("gm3", False),
        ("gm4", False),
    ]
    assert SlurmNode("gm1", "127.0.0.1", "mixed", (("v100", 2),)).ray_node().models == (
        ("V100", 2),
    )


def test_the_runner_writes_the_exit_code(tmp_path: Path) -> None:
    spec = tmp_path / "l-0.json"
    log = tmp_path / "job.log"
    body = {
        "command": f"{sys.executable} -c 'import sys; print(\"hi\"); sys.exit(3)'",
        "workdir": str(tmp_path),
        "env": {"GPUMOSAIC_LEASE_ID": "l"},
        "log_path": str(log),
    }
    spec.write_text(json.dumps(body))
    assert main(["rank", str(spec)]) == 3
    assert json.loads(exit_path(spec).read_text())["code"] == 3
    assert "hi" in log.read_text()


@pytest.mark.parametrize(
    ("options", "flag"),
    [
        ({"executor": "kube"}, "--executor"),
        ({"executor": "slurm", "cluster": "v100:2"}, "--cluster"),
        ({"executor": "slurm", "ray_address": "10.0.0.1:6379"}, "--ray-address"),
        ({"slurm_partition": "gm"}, "--slurm-partition"),
    ],
)
def test_serve_options_that_do_not_go_together(options: dict[str, object], flag: str) -> None:
    with pytest.raises(InputError) as err:
        ServeDescription(**options)  # type: ignore[arg-type]
    assert flag in str(err.value)


def test_a_missing_slurm_conf_is_one_line_at_once(tmp_path: Path) -> None:
    from gpumosaic.run.serve_start import connect_slurm

    missing = str(tmp_path / "slurm.conf")
    with pytest.raises(InputError) as err:
        connect_slurm(ServeDescription(executor="slurm", slurm_conf=missing))
    assert "--slurm-conf" in str(err.value) and "no such file" in str(err.value)


@pytest.mark.parametrize(
    ("comment", "preemptible", "steps"),
    [
        ("steps=500,job_type=A3C", True, 500.0),
        ("(null)", False, 1.0),  # a plain sbatch: no lease library
        ("job_type=A3C", False, 1.0),
        ("steps=500,lease=off", False, 500.0),
    ],
)
def test_a_comment_without_steps_is_one_non_preemptible_lease(
    comment: str, preemptible: bool, steps: float
) -> None:
    from gpumosaic.runtime.executors.slurm.adopt import HeldJob, submission

    sub = submission(HeldJob("7", "j", "root", "gres:gpu:1", comment, "PENDING", "/tmp"))
    assert (sub.preemptible, sub.steps, sub.gpus) == (preemptible, steps, 1)


@pytest.mark.parametrize("comment", ["lease=maybe", "lease=on", "steps=5,colour=red"])
def test_a_comment_it_cannot_read_is_not_adopted(comment: str) -> None:
    from gpumosaic.runtime.executors.slurm.adopt import HeldJob, submission

    with pytest.raises(ValueError):
        submission(HeldJob("7", "j", "root", "gres:gpu:1", comment, "PENDING", "/tmp"))


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ([], "--cluster: required"),
        (["--executor", "slurm", "--cluster", "v100:2"], "--cluster: does not go with"),
        (["--slurm-conf", "/x/slurm.conf", "--cluster", "v100:2"], "needs --executor slurm"),
        (["--executor", "kube", "--cluster", "v100:2"], "--executor kube: one of ray, slurm"),
        (["--executor", "slurm", "--slurm-conf", "/no/such/slurm.conf"], "no such file"),
    ],
)
def test_sim_vs_live_executor_mistakes_are_one_line(args: list[str], words: str) -> None:
    from typer.testing import CliRunner

    from gpumosaic.cli import app

    argv = ["sim-vs-live", "--workload", "gavel:jobs=2", "--policy", "fifo", *args]
    result = CliRunner().invoke(app, argv)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0].startswith("error: ") and words in lines[0], result.output
