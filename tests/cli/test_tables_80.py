"""Readable at 80 columns (issue 36): every command's tables and --help rendered at 80
columns cut no cell (no "…"), keep identifying names whole, and stay within 80."""

from __future__ import annotations

import importlib
import time
from typing import Any

import pytest
from typer.main import get_group
from typer.testing import CliRunner

from gpumosaic.cli.app import COMMAND_MODULES, app

ENV = {"COLUMNS": "80", "LINES": "50"}


def run80(args: list[str]) -> str:
    result = CliRunner().invoke(app, args, env=ENV)
    assert result.exit_code == 0, result.output
    return result.output


def assert_80(text: str, whole: list[str] = ()) -> None:  # type: ignore[assignment]
    assert "…" not in text, text
    # Table rows and help lines; prose notes are single long lines that a terminal wraps.
    too_wide = [
        line for line in text.splitlines()
        if len(line) > 80 and (not line.startswith(("note:", "wrote ")) or "│" in line)
    ]  # fmt: skip
    assert not too_wide, too_wide
    lines = text.splitlines()
    for name in whole:  # on one line, not folded
        assert any(name in line for line in lines), (name, text)


def test_run_list_at_80_columns() -> None:
    assert_80(run80(["run", "--list"]), ["gavel-continuous", "spatial-sharing"])


def test_a_placement_comparison_at_80_columns(tmp_path) -> None:  # type: ignore[no-untyped-def]
    text = run80(
        ["compare", "--placements", "gpuclustering,worstfit", "--sharing", "none",
         "--sharing", "nvshare:tq=30", "--seeds", "0", "--workers", "1",
         "--workload", "gavel:jobs=4,rate=0,milli=spatial", "--out", str(tmp_path)]
    )  # fmt: skip
    assert_80(text, ["gpuclustering + nvshare:tq=30", "worstfit + none"])


def test_simulate_at_80_columns() -> None:
    assert_80(run80(["simulate", "--workload", "gavel:jobs=4,rate=0"]), ["avg JCT"])


def test_the_policy_table_keeps_policy_names_whole() -> None:
    from rich.console import Console
    from rich.table import Table

    from gpumosaic.cli.tables import fit

    table = Table(title="avg JCT (h) ± sd [max rho] (completed / rejected / unfinished)")
    table.add_column("policy")
    for rate in ("1/h", "2/h", "3/h"):
        table.add_column(rate, justify="right")
    cell = "12.34 ± 0.56 [1.23] (100 / 0 / 0)"
    for policy in ("max_min_fairness", "max_min_fairness_perf"):
        table.add_row(policy, cell, cell, cell)
    console = Console(width=80, record=True)
    console.print(fit(table, ("policy",)))
    text = console.export_text()
    assert_80(text, ["max_min_fairness ", "max_min_fairness_perf"])


NOW = time.time() - 120  # "2 min ago"
JOBS = [
    {"id": 1, "name": "resnet50-a", "state": "done", "steps_done": 150000.0,
     "steps": 150000.0, "gpu_type": "V100", "gpu_index": "1", "attained_s": 9.5,
     "steps_per_s": 7972.59, "submitted_at": NOW, "reason": ""},
    {"id": 2, "name": "never-ran", "state": "queued", "steps_done": 0.0, "steps": 150000.0,
     "gpu_type": "V100", "gpu_index": "0", "attained_s": 0.0, "steps_per_s": None,
     "submitted_at": NOW, "reason": "waits for a GPU: every V100 is held by a job with "
     "more priority this round"},
    {"id": 3, "name": "crashed", "state": "failed", "steps_done": 0.0, "steps": 10.0,
     "gpu_type": "V100", "gpu_index": "0", "attained_s": 0.0, "steps_per_s": None,
     "submitted_at": NOW, "reason": "exit status 1"},
]  # fmt: skip


def test_jobs_at_80_columns_and_no_gpu_for_a_job_that_never_ran(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from gpumosaic.runtime.api.client import ServiceClient

    monkeypatch.setattr(ServiceClient, "jobs", lambda self, state, name: [dict(r) for r in JOBS])
    text = run80(["jobs"])
    assert_80(text, ["resnet50-a", "never-ran", "150,000 (100%)", "V100:1", "7,972.59"])
    assert len([line for line in text.splitlines() if line.startswith("id")]) == 1, text
    rows = {line.split()[1]: line for line in text.splitlines() if line.split()[0].isdigit()}
    assert "V100" in rows["resnet50-a"]
    assert "V100" not in rows["never-ran"] and "V100" not in rows["crashed"]
    assert "exit status 1" in text  # why it failed: a line under the table
    # A name too long to leave room for the other columns: it folds onto a second line,
    # and the table is printed as several (each with id, name, state and progress); no
    # column is left out, no cell cut.
    long_name = "a-very-long-experiment-name-that-goes-on-and-on"
    monkeypatch.setattr(
        ServiceClient, "jobs", lambda self, state, name: [{**JOBS[0], "name": long_name}]
    )
    text = run80(["jobs"])
    assert_80(text, ["V100:1", "7,972.59"])
    assert long_name in "".join(line[4:].split()[0] for line in text.splitlines()[1:3]), text
    headers = [w for line in text.splitlines() if line.startswith("id") for w in line.split()]
    for column in ("gpu", "attained", "steps/s", "submitted"):
        assert column in headers, text


def test_job_prints_integers_as_integers_and_no_gpu_it_never_held(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from gpumosaic.runtime.api.client import ServiceClient

    row: dict[str, Any] = {**JOBS[2], "log_tail": ""}
    monkeypatch.setattr(ServiceClient, "job", lambda self, job_id: dict(row))
    text = run80(["job", "3"])
    fields = {k.strip(): v.strip() for k, _, v in (x.partition(":") for x in text.splitlines())}
    assert fields["steps"] == "10" and fields["steps_done"] == "0", text
    assert fields["gpu_type"] == "-" and fields["gpu_index"] == "-", text


def _commands() -> list[list[str]]:
    for modules in COMMAND_MODULES.values():
        for module in modules:
            importlib.import_module(f"gpumosaic.cli.{module}")
    paths: list[list[str]] = []

    def walk(command: Any, path: list[str]) -> None:
        paths.append(path)
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*path, name])

    walk(get_group(app), [])
    return paths


@pytest.mark.parametrize("path", _commands(), ids=lambda p: " ".join(p) or "gpumosaic")
def test_help_at_80_columns_cuts_nothing(path: list[str]) -> None:
    text = run80([*path, "--help"])
    assert_80(text)
    command = get_group(app)
    for name in path:
        command = command.commands[name]
    flat = " ".join(text.split())
    for name, sub in getattr(command, "commands", {}).items():  # whole, not cut to "..."
        first = " ".join((sub.short_help or (sub.help or "").split("\n\n")[0]).split())
        assert first in flat, (name, first)
