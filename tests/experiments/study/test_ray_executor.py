"""``--executor ray``: each batch a Ray task on the test run's one local Ray instance
(the ``ray_cluster`` fixture of tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from study_builders import TINY_NVSHARE, experiment

from gpumosaic.experiments.study.execute import execute


@pytest.mark.slow
def test_ray_executor_stores_what_the_local_one_does(tmp_path: Path, ray_cluster: object) -> None:
    study = experiment(tmp_path, TINY_NVSHARE)
    on_ray = execute(study, tmp_path / "ray", executor="ray", workers=2)
    assert (on_ray.ran, on_ray.failed) == (6, ())
    execute(study, tmp_path / "local")
    a = pd.read_parquet(tmp_path / "ray" / "runs.parquet").sort_values("run_id")
    b = pd.read_parquet(tmp_path / "local" / "runs.parquet").sort_values("run_id")
    assert a["total_s"].tolist() == b["total_s"].tolist()
    assert execute(study, tmp_path / "ray", executor="ray").skipped == 6
