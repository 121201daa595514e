"""The throw-away Slurm cluster of these tests (tests/slurm_cluster.py): started once per
test session, on first use, and stopped by PID at its end. Where it cannot run (not root,
Slurm not installed) every test that asks for it is skipped with that one reason."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from slurm_cluster import SlurmCluster, start_cluster, unavailable


@pytest.fixture(scope="session")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    why = unavailable()
    if why is not None:
        pytest.skip(why)
    cluster = start_cluster(tmp_path_factory.mktemp("slurm"))
    yield cluster
    cluster.stop()
