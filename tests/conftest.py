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


# Test modules that start a Ray instance of their own (a `serve` process with a local Ray,
# `ray start`); with the tests on the session's Ray (the `ray_cluster` fixture) they form
# one pytest-xdist group, run by one worker (`make test`: `-n 2 --dist loadgroup`), so
# that the machine runs one Ray at a time as without xdist, and `ray_cluster` starts once.
_STARTS_RAY = frozenset(
    {
        "test_ray_token_auth.py",
        "test_serve_cli.py",
        "test_two_nodes.py",
    }
)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "ray_cluster" in getattr(item, "fixturenames", ()) or item.path.name in _STARTS_RAY:
            item.add_marker(pytest.mark.xdist_group("ray"))
        elif "slurm" in getattr(item, "fixturenames", ()):
            # The throw-away Slurm (tests/slurm_cluster.py) is started once, by one worker.
            item.add_marker(pytest.mark.xdist_group("slurm"))
