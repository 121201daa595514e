"""``gpumosaic slurm setup``: what it adds to slurm.conf, the job_submit.lua beside it, a
second run that changes nothing, and a foreign job_submit.lua left alone (one line)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from gpumosaic.cli import app

runner = CliRunner()

CONF = """ClusterName=c
JobSubmitPlugins=defaults # site's
NodeName=n1 Gres=gpu:v100:2
PartitionName=batch Nodes=n1 Default=YES
"""


def setup(conf: Path, partition: str = "gm") -> tuple[int, str]:
    result = runner.invoke(app, ["slurm", "setup", "--conf", str(conf), "--partition", partition])
    return result.exit_code, result.output


def test_setup_adds_what_it_needs_once(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text(CONF)
    code, out = setup(conf)
    assert code == 0, out
    text = conf.read_text()
    assert "JobSubmitPlugins=defaults,lua" in text
    assert "PartitionName=gm Nodes=ALL State=UP" in text
    assert text.startswith(CONF.split("JobSubmitPlugins")[0])  # the rest untouched
    lua = (tmp_path / "job_submit.lua").read_text()
    assert 'local PARTITION = "gm"' in lua and "job_desc.priority = 0" in lua
    before = (conf.read_bytes(), (tmp_path / "job_submit.lua").read_bytes())
    code, out = setup(conf)
    assert code == 0 and "nothing changed" in out, out
    assert (conf.read_bytes(), (tmp_path / "job_submit.lua").read_bytes()) == before


def test_an_existing_partition_is_kept_and_a_foreign_lua_left_alone(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text(CONF)
    (tmp_path / "job_submit.lua").write_text("-- the site's own\n")
    code, out = setup(conf, "batch")
    assert code != 0 and "merge" in out and len(out.strip().splitlines()) == 1, out
    assert conf.read_text() == CONF
    (tmp_path / "job_submit.lua").unlink()
    assert setup(conf, "batch")[0] == 0
    assert "PartitionName=batch" in conf.read_text()
    assert conf.read_text().count("PartitionName=batch") == 1
    assert setup(conf, "no such/name")[0] != 0
