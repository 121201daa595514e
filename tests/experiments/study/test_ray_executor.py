"""``--executor ray``: each batch a Ray task on one local Ray instance for the session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from study_builders import TINY_NVSHARE, experiment

from gpumosaic.experiments.study.execute import execute

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """One local instance for this module (reused if some other test started one); stopped
    at the module's end, so that tests/live/rounds can start theirs with logical GPUs."""
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)  # fmt: skip
    yield
    if started:
        ray.shutdown()


@pytest.mark.slow
def test_ray_executor_stores_what_the_local_one_does(tmp_path: Path, local_ray: None) -> None:
    study = experiment(tmp_path, TINY_NVSHARE)
    on_ray = execute(study, tmp_path / "ray", executor="ray", workers=2)
    assert (on_ray.ran, on_ray.failed) == (6, ())
    execute(study, tmp_path / "local")
    a = pd.read_parquet(tmp_path / "ray" / "runs.parquet").sort_values("run_id")
    b = pd.read_parquet(tmp_path / "local" / "runs.parquet").sort_values("run_id")
    assert a["total_s"].tolist() == b["total_s"].tolist()
    assert execute(study, tmp_path / "ray", executor="ray").skipped == 6
