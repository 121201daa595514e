"""Every declared dependency earns its place: it is imported somewhere in src (or, for a
solver cvxpy loads by name, that name is used), and an optional one fails with an error
that names its extra."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "gpumosaic"
IMPORT_NAMES = {"pyyaml": "yaml", "pyarrow": "pyarrow"}
# Used without an import statement, and where: (distribution, text that must appear in src).
BY_NAME = {"ecos": '"ECOS"'}  # cvxpy's ECOS solver: problem.solve(solver="ECOS")


def _name(requirement: str) -> str:
    return re.split(r"[<>=!\[; ]", requirement, maxsplit=1)[0].lower()


def _sources() -> str:
    return "\n".join(p.read_text() for p in SRC.rglob("*.py"))


def _declared(*extras: str) -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = [_name(r) for r in project["dependencies"]]
    for extra in extras:
        names += [_name(r) for r in project["optional-dependencies"][extra]]
    return names


@pytest.mark.parametrize("dist", _declared("parquet"))
def test_every_declared_dependency_is_used_in_src(dist: str) -> None:
    text = _sources()
    if dist in BY_NAME:
        assert BY_NAME[dist] in text, f"{dist} is declared but {BY_NAME[dist]} is never used"
        return
    module = IMPORT_NAMES.get(dist, dist.replace("-", "_"))
    pattern = rf"^\s*(import|from)\s+{re.escape(module)}\b"
    assert re.search(pattern, text, re.MULTILINE), f"{dist} is declared but never imported"


def test_parquet_without_pyarrow_names_the_extra(tmp_path: Path, monkeypatch) -> None:
    import numpy as np

    from gpumosaic.errors import InputError
    from gpumosaic.experiments.store import write_run
    from gpumosaic.mechanisms.gandiva.sim import GandivaConfig, simulate_gandiva
    from gpumosaic.results.summary import summarize
    from gpumosaic.workloads.spec import parse_cluster, parse_workload

    workload = parse_workload("gavel:jobs=3", seed=0).workload
    cluster, config = parse_cluster("v100:2"), GandivaConfig()
    result = simulate_gandiva(cluster, workload, config, np.random.default_rng(0))
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow -> ImportError
    with pytest.raises(InputError, match=r"gpumosaic\[parquet\]"):
        write_run(result, summarize(result), tmp_path, table_format="parquet")
