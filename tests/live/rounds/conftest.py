"""One local Ray instance for the whole test run (logical GPUs of two models, no
dashboard, auth off), and a helper that runs a round service on it in this process."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

JOBS = Path(__file__).parent / "jobs"
TRAIN = f"{sys.executable} {JOBS / 'train.py'}"


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[object]:
    os.environ["RAY_AUTH_MODE"] = "disabled"
    ray = pytest.importorskip("ray")
    ray.init(
        num_cpus=2,
        num_gpus=4,
        resources={"gpumosaic_model_V100": 2, "gpumosaic_model_K80": 2},
        include_dashboard=False,
        logging_level="ERROR",
        log_to_driver=False,
    )
    yield ray
    ray.shutdown()


def wait_for(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    give_up = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > give_up:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(0.05)
