"""A small simulate study run once per test session into a result folder, shared by the
query, report and explain tests (they only read it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from study_builders import TINY_SIMULATE, experiment

from gpumosaic.experiments.study.execute import execute


@pytest.fixture(scope="session")
def tiny_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("study")
    execute(experiment(root, TINY_SIMULATE), root / "out")
    return root / "out"
