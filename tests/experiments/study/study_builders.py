"""Small experiment files for the study tests (tiny grids: each runs in well under a second)."""

from __future__ import annotations

from pathlib import Path

from gpumosaic.experiments.study.file import Experiment, load_experiment

TINY_SIMULATE = """\
[experiment]
name = "tiny"
kind = "simulate"

[grid]
cluster = "v100:2"
workload = "gavel:jobs=6,rate=0,milli=spatial"
placement = ["strided", "fgd"]
seed = "0-1"

[report]
mosaic = { placement = "fgd", seed = 1 }

[[reference]]
where = { placement = "fgd" }
metric = "avg_jct_s"
value = 1000.0
source = "made up for the test"
"""

TINY_NVSHARE = """\
[experiment]
name = "tiny-nvshare"
kind = "nvshare"

[grid]
job = ["small_50", "big_50"]
setup = ["serial", "on"]
tq_s = [60.0, 30.0]
"""


def write(tmp_path: Path, text: str, name: str = "exp.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def experiment(tmp_path: Path, text: str) -> Experiment:
    return load_experiment(write(tmp_path, text))
