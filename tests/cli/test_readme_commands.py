"""Every ``gpumosaic`` command in the README's code blocks, as written (issue 28: examples
must not drift). The commands are read from README.md itself:

- every option a README command uses is one its command has (fast, no command runs);
- every command runs, in the README's order, in a scratch folder that sees the
  repository's ``examples/`` and ``src/`` (the README's relative paths), and exits 0
  (slow: the whole README, the openb-scale runs and the 70-run fill study included).

Not run, each with its reason in ``NOT_RUN``: commands that start a service and wait
(``serve``, ``extender`` without ``replay``), talk to one (``submit``, ``jobs``), or need
a GPU (``share``); the tests under tests/live/ run those. One placeholder is filled in,
as the README says: ``RUN_ID`` is the first run id ``query`` lists for that folder.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

NOT_RUN = {
    "serve": "starts the round service and waits (tests/runtime/service)",
    "submit": "talks to a running service (tests/runtime/service)",
    "jobs": "talks to a running service (tests/runtime/service)",
    "share": "needs a GPU and the share daemon (tests/runtime/share, bench/gpu_share_check.py)",
    "extender": "serves kube-scheduler until stopped (tests/apps/extender)",
    "slurm": "edits a Slurm cluster's slurm.conf (tests/runtime/executors/slurm)",
}


def readme_commands() -> list[list[str]]:
    """The ``gpumosaic`` command lines of the README's plain code blocks, as argv lists
    (continuation lines joined, comments and a trailing ``&`` dropped)."""
    commands: list[list[str]] = []
    in_block = False
    pending = ""
    for line in README.read_text().splitlines():
        if line.startswith("```"):
            in_block = line.strip() == "```" and not in_block
            pending = ""
            continue
        if not in_block:
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        text = (pending + line).strip()
        pending = ""
        if not text.startswith("gpumosaic "):
            continue
        argv = shlex.split(text, comments=True)
        if argv[-1] == "&":
            argv = argv[:-1]
        commands.append(argv[1:])
    return commands


def runnable(argv: list[str]) -> bool:
    if argv[0] == "extender" and argv[1:2] == ["replay"]:
        return True
    return argv[0] not in NOT_RUN


COMMANDS = readme_commands()


def test_the_readme_has_its_commands() -> None:
    names = {argv[0] for argv in COMMANDS}
    assert {"simulate", "compare", "fill", "run", "report", "query", "explain"} <= names
    assert sum(runnable(argv) for argv in COMMANDS) >= 20


def _options(argv: list[str]) -> tuple[str, set[str]]:
    """The command (``reproduce nvshare``...) an argv names and the options it takes."""
    import typer.main

    from gpumosaic.cli.app import app

    # (typer may ship its own copy of click: its classes, not click's, are used here.)
    command = typer.main.get_command(app)
    ctx = command.context_class(command)
    path: list[str] = []
    rest = list(argv)
    while hasattr(command, "resolve_command") and rest and not rest[0].startswith("-"):
        _name, found, _args = command.resolve_command(ctx, rest[:1])
        assert found is not None, rest[0]
        command, path, rest = found, [*path, rest[0]], rest[1:]
        ctx = command.context_class(command, parent=ctx)
    options = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
    return " ".join(path), options | {"--help"}


@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(a)[:60] for a in COMMANDS])
def test_every_option_in_the_readme_exists(argv: list[str]) -> None:
    name, options = _options(argv)
    own = argv[: argv.index("--")] if "--" in argv else argv  # after --: the job's own
    used = {a.split("=")[0] for a in own if a.startswith("--")}
    assert used <= options, f"gpumosaic {name}: {sorted(used - options)} not options"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch folder where the README's relative paths resolve: runs/ is written here."""
    folder = tmp_path_factory.mktemp("readme")
    for name in ("examples", "src"):
        (folder / name).symlink_to(ROOT / name)
    return folder


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [sys.executable, "-m", "gpumosaic", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )


def _fill_in(argv: list[str], cwd: Path) -> list[str]:
    if "RUN_ID" not in argv:
        return argv
    folder = argv[1]
    first = "SELECT run_id FROM runs ORDER BY run_id LIMIT 1"
    listed = _run(["query", folder, first, "--json"], cwd)
    assert listed.returncode == 0, listed.stderr
    run_id = json.loads(listed.stdout)[0]["run_id"]
    return [run_id if a == "RUN_ID" else a for a in argv]


RUNNABLE = [argv for argv in COMMANDS if runnable(argv)]


@pytest.mark.xdist_group("readme")
def test_the_readme_group_holds_under_xdist(request: pytest.FixtureRequest) -> None:
    """The group below is real: under ``--dist loadgroup`` pytest-xdist names the group in
    the test's id (pytest 9.2 with pytest-xdist 3.8 lost it silently: pyproject.toml)."""
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not run by pytest-xdist with --dist loadgroup (make test runs it so)")
    assert request.node.nodeid.endswith("@readme"), request.node.nodeid


# In the README's order, in one workspace: later commands read what earlier ones wrote
# (``report runs/fgd`` after ``run --preset fgd-openb --out runs/fgd``), so under
# pytest-xdist they are one group, run by one worker.
@pytest.mark.slow
@pytest.mark.xdist_group("readme")
@pytest.mark.parametrize("argv", RUNNABLE, ids=[" ".join(a)[:60] for a in RUNNABLE])
def test_every_readme_command_runs_as_written(argv: list[str], workspace: Path) -> None:
    done = _run(_fill_in(argv, workspace), workspace)
    assert done.returncode == 0, f"gpumosaic {shlex.join(argv)}\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr
    assert not re.search(r"^error:", done.stderr, re.MULTILINE), done.stderr
