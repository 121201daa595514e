"""The documented demo (examples/gandiva_demo.py on examples/gandiva_jobs.csv) shows what
docs/gandiva.md says it shows: time slicing, packs kept and undone, and migrations."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parents[4] / "examples"


def test_the_demo_shows_suspensions_packing_and_migrations(
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = importlib.util.spec_from_file_location("gandiva_demo", EXAMPLES / "gandiva_demo.py")
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    actions = demo.main(str(EXAMPLES / "gandiva_jobs.csv"))
    out = capsys.readouterr().out
    assert "19 of 19 jobs completed" in out
    assert actions["Start"] == 19
    assert actions["Suspend"] > 100 and actions["Resume"] > 100  # 60 s time slices
    assert actions["Pack"] > actions["Unpack"] >= 1  # some pairs kept, some undone
    assert actions["Migrate (defragment, to another server)"] == 1  # room for the 4-GPU job
    assert actions["Migrate (spread, to another server)"] >= 1
