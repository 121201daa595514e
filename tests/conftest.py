"""Test-wide settings: hypothesis draws the same examples on every run (CI included),
so a failure or a slow case reproduces exactly; one local Ray instance for the whole test
run, shared by every test that needs Ray (live round service, study executor)."""

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

settings.register_profile("gpumosaic", derandomize=True, deadline=None, print_blob=True)
settings.load_profile("gpumosaic")


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[object]:
    os.environ["RAY_AUTH_MODE"] = "disabled"
    ray = pytest.importorskip("ray")
    from gpumosaic.runtime.executors.ray_connect import init_local_ray

    init_local_ray(  # loopback only
        num_cpus=2,
        num_gpus=4,
        resources={"gpumosaic_model_V100": 2, "gpumosaic_model_K80": 2},
        logging_level="ERROR",
        log_to_driver=False,
    )
    yield ray
    ray.shutdown()
