"""Start-up cost, checked by what a command imports (never by timing): ``--help`` and
``fill`` must not load the solvers, dataframes, plots, servers or the simulator they do not
use. Each case runs the command line in a fresh interpreter and reads ``sys.modules``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Imported by no short command: solvers, dataframes, plots, servers, clients, YAML.
HEAVY = (
    "cvxpy",
    "scipy",
    "pandas",
    "matplotlib",
    "pyarrow",
    "ray",
    "fastapi",
    "uvicorn",
    "httpx",
    "kubernetes",
    "yaml",
    "numba",
)
# What --help and fill never run: the run description's simulator and the round mechanism.
SIMULATOR = (
    "gpumosaic.run.build",
    "gpumosaic.mechanisms.rounds.decision",
    "gpumosaic.mechanisms.event.scheduling_pass",
    "gpumosaic.mechanisms.event.simulator",
)
# fill runs one replay in this process: no pool, no event loop, no policies, no bar (--json).
FILL_ONLY = (
    "gpumosaic.policies",
    "multiprocessing",
    "concurrent.futures",
    "asyncio",
    "rich.progress",
)

RUN = """
import json, runpy, sys
report, argv = sys.argv[1], sys.argv[2:]
sys.argv = ["gpumosaic", *argv]
try:
    runpy.run_module("gpumosaic", run_name="__main__")
except SystemExit as exit:
    code = exit.code
else:
    code = 0
with open(report, "w") as handle:
    json.dump({"code": code, "modules": sorted(sys.modules)}, handle)
"""

NODES = "sn,cpu_milli,memory_mib,gpu,model\nn0,32000,65536,2,T4\nn1,64000,65536,4,V100M16\n"
TASKS = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,4000,1024,1,500\np1,8000,1024,2,1000\n"


def loaded(tmp_path: Path, *argv: str, code: int = 0) -> set[str]:
    report = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(report), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert report.exists(), done.stderr
    result = json.loads(report.read_text())
    assert result["code"] in ((0, None) if code == 0 else (code,)), done.stdout + done.stderr
    return set(result["modules"])


def top_level(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return [n for n in names if n in modules]


def test_help_lists_commands_without_running_them(tmp_path: Path) -> None:
    modules = loaded(tmp_path, "--help")
    assert top_level(modules, HEAVY + SIMULATOR) == []
    # Commands are listed from COMMAND_HELP: no command module, not even numpy, is loaded.
    commands = [m for m in modules if m.startswith("gpumosaic.cli.")]
    assert sorted(commands) == ["gpumosaic.cli.app", "gpumosaic.cli.shown"], commands
    assert "numpy" not in modules


def test_a_misspelt_command_imports_no_command(tmp_path: Path) -> None:
    # "Did you mean 'simulate'?" comes from the command names alone.
    modules = loaded(tmp_path, "simulte", code=2)
    # the app and its escaping of what it prints (cli/shown.py), no command
    assert sorted(m for m in modules if m.startswith("gpumosaic.cli.")) == [
        "gpumosaic.cli.app",
        "gpumosaic.cli.shown",
    ]


def test_the_listed_help_line_is_the_commands_own() -> None:
    # COMMAND_HELP stands for each command's help in `gpumosaic --help`: it must say what
    # the command itself says (the first paragraph of its help).
    import click
    import typer.main

    from gpumosaic.cli.app import COMMAND_HELP, COMMAND_MODULES, app

    group = typer.main.get_command(app)
    ctx = click.Context(group)
    for name in COMMAND_MODULES:
        group.resolve_command(ctx, [name])  # imports the command's module
        command = group.commands[name]
        own = (command.short_help or command.help or "").split("\n\n")[0]
        assert COMMAND_HELP.get(name) == " ".join(own.split()), name


@pytest.mark.slow
@pytest.mark.parametrize("placement", ["fgd", "random"])
def test_fill_imports_only_the_replay(tmp_path: Path, placement: str) -> None:
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "tasks.csv").write_text(TASKS)
    modules = loaded(
        tmp_path,
        "fill",
        "--nodes",
        str(tmp_path / "nodes.csv"),
        "--tasks",
        str(tmp_path / "tasks.csv"),
        "--placement",
        placement,
        "--json",
    )
    assert "gpumosaic.mechanisms.fill.simulator" in modules
    # Every placement decides in compiled code (placement/kernel/): numba, which itself
    # imports yaml (its config file), concurrent.futures, and scipy.linalg (its CPU target
    # looks for BLAS); with coverage.py installed (the dev extras) numba's coverage support
    # imports it, and it multiprocessing. Nothing else heavy is loaded.
    compiled = ("numba", "scipy", "yaml", "concurrent.futures", "multiprocessing")
    expected = tuple(n for n in HEAVY + SIMULATOR + FILL_ONLY if n not in compiled)
    assert top_level(modules, expected) == []
    # The other commands' modules are not even imported (the shared helpers are: the
    # bounds table every command's numbers are checked against, the 80-column tables).
    shared = (
        "gpumosaic.cli.app",
        "gpumosaic.cli.__main__",
        "gpumosaic.cli.progress",
        "gpumosaic.cli.bounds",
        "gpumosaic.cli.tables",
        "gpumosaic.cli.shown",
    )
    assert not any(m.startswith("gpumosaic.cli.") and m != "gpumosaic.cli.fill"
                   and m not in shared for m in modules)  # fmt: skip


def test_every_command_module_is_listed() -> None:
    # A command is imported only through COMMAND_MODULES: one registered by a module that
    # is not listed there (or listed under another name) would silently vanish.
    import importlib
    import pkgutil

    import typer.main

    import gpumosaic.cli
    from gpumosaic.cli.app import COMMAND_MODULES, app

    for module in pkgutil.walk_packages(gpumosaic.cli.__path__, "gpumosaic.cli."):
        if module.name != "gpumosaic.cli.__main__":
            importlib.import_module(module.name)
    defined: dict[str, set[str]] = {}
    for info in app.registered_commands:
        assert info.callback is not None
        name = info.name or typer.main.get_command_name(info.callback.__name__)
        defined.setdefault(name, set()).add(info.callback.__module__)
    for group in app.registered_groups:
        assert group.name is not None and group.typer_instance is not None
        for info in group.typer_instance.registered_commands:
            assert info.callback is not None
            defined.setdefault(group.name, set()).add(info.callback.__module__)
    assert set(defined) == set(COMMAND_MODULES)
    for name, modules in defined.items():
        listed = {f"gpumosaic.cli.{m}" for m in COMMAND_MODULES[name]}
        assert modules <= listed, name


# A mistake's one line: the options' and the description's own checks, before any run.
# Each of these is refused (exit 2) by names and light parsers alone: no numpy, no
# simulator, no policy class, no solver, no Parquet.
LIGHT_MISTAKES = (
    ("simulate", "--seed", "-1"),
    ("simulate", "--round-s", "nan"),
    ("simulate", "--resolve-interval-s", "-1"),
    ("simulate", "--gpus-per-node", "0"),
    ("simulate", "--policy", "nosuch"),
    ("simulate", "--mechanism", "rounds", "--policy", "nosuch"),
    ("simulate", "--mechanism", "rounds", "--policy", "sjf"),
    ("simulate", "--mechanism", "nosuch"),
    ("simulate", "--format", "xlsx"),
    ("compare", "--seeds", "-1"),
    ("fill", "--seed", "-1"),
    ("run", "missing.toml"),
)
# What a light mistake never loads (besides HEAVY and SIMULATOR).
RUN_ONLY = (
    "numpy",
    "gpumosaic.engine",
    "gpumosaic.mechanisms.event.simulator",
    "gpumosaic.mechanisms.rounds.sim",
    "gpumosaic.mechanisms.gandiva.sim",
    "gpumosaic.policies.fifo",
    "gpumosaic.policies.lp_base",
    "gpumosaic.experiments.study.execute",
)


@pytest.mark.parametrize("argv", LIGHT_MISTAKES, ids=" ".join)
def test_a_mistake_is_refused_before_the_simulators_load(
    tmp_path: Path, argv: tuple[str, ...]
) -> None:
    modules = loaded(tmp_path, *argv, code=2)
    assert top_level(modules, HEAVY + SIMULATOR + RUN_ONLY) == []


# A mistake inside a spec string (issue 28): refused by that spec's grammar -- the parser
# the build itself uses, in plain Python -- before numpy, a scorer, a policy class, the
# simulators or a command's service loads. "{out}" is a fresh folder (compare writes one).
SPEC_MISTAKES = (
    ("simulate", "--cluster", "v100:x"),
    ("simulate", "--cluster", "h100:4"),
    ("simulate", "--cluster", "v100:5", "--gpus-per-node", "2"),
    ("simulate", "--cluster", "openb:gpu", "--gpus-per-node", "2"),
    ("simulate", "--placement", "fgdd"),
    ("simulate", "--placement", "pwr=x,fgd"),
    ("simulate", "--sharing", "nvshare:tq=-1"),
    ("simulate", "--sharing", "capd"),
    ("simulate", "--sharing", "parametric:alpha=-1"),
    ("simulate", "--sharing", "gandiva:packing=maybe"),
    ("simulate", "--mechanism", "rounds", "--policy", "fifo", "--sharing", "nvshare:tq=0"),
    ("simulate", "--mechanism", "gandiva", "--placement", "fgdd"),
    ("simulate", "--workload", "gavel:jobs=abc"),
    ("simulate", "--workload", "gavel:jobs=0"),
    ("simulate", "--workload", "gavl:jobs=3"),
    ("simulate", "--workload", "gavel-stream:rate=3"),
    ("simulate", "--workload", "openb:default,compress=0"),
    ("simulate", "--workload", "openb:defaultt"),
    ("simulate", "--cluster", "openb:gpuu"),
    ("simulate", "--cluster", "{out}/nodes.csv"),
    ("simulate", "--background", "openb:default,fraction=2"),
    ("simulate", "--background", "openb:nosuch"),
    ("compare", "--out", "{out}", "--cluster", "v100:x"),
    ("compare", "--out", "{out}", "--placements", "fgdd"),
    ("compare", "--out", "{out}", "--sharing", "nvshare:tq=-1"),
    ("compare", "--out", "{out}", "--workload", "gavel:jobs=abc"),
    ("compare", "--out", "{out}", "--policies", "nosuch", "--rates", "1"),
    ("compare", "--out", "{out}", "--policies", "fifo", "--rates", "1", "--cluster", "v100:x"),
    ("compare", "--out", "{out}", "--mode", "fill", "--placements", "fgdd"),
    ("serve", "--cluster", "v100:x"),
    ("serve", "--placement", "fgdd"),
    ("serve", "--policy", "nosuch"),
    ("serve", "--sharing", "nvshare:tq=-1"),
    ("serve", "--sharing", "nvshar"),
    ("serve", "--mechanism", "gandiva:packing=maybe"),
    ("serve", "--mechanism", "gandi"),
    ("serve", "--round-s", "nan"),
    ("reproduce", "nvshare", "--tq", "abc"),
    ("reproduce", "gavel", "nosuch"),
    ("sim-vs-live", "--cluster", "v100:x", "--workload", "gavel:jobs=3", "--policy", "fifo"),
    ("sim-vs-live", "--cluster", "v100:2", "--workload", "gavel:jobs=abc", "--policy", "fifo"),
    ("extender", "--cluster", "v100:x"),
    ("extender", "--placement", "fgdd"),
    ("extender", "replay", "--placement", "fgdd"),
    ("fill", "--placement", "fgdd"),
    ("fill", "--nodes", "openb:gpuu"),
    ("fill", "--tasks", "{out}/tasks.csv"),
)
# What a spec mistake never loads: HEAVY, SIMULATOR and RUN_ONLY, the scorers, the policy
# classes, the sharing models, the mechanisms' deciders, the live services. (The
# mechanisms' packages and plug-ins load: they check their options, in plain Python.)
NEVER_FOR_A_SPEC = HEAVY + SIMULATOR + RUN_ONLY
SPEC_ONLY = (
    "gpumosaic.placement.scorers",
    "gpumosaic.placement.base",
    "gpumosaic.policies.base",
    "gpumosaic.sharing.interference",
    "gpumosaic.sharing.speed",
    "gpumosaic.mechanisms.gandiva.decider",
    "gpumosaic.model.state",
    "gpumosaic.workloads.gavel",
    "gpumosaic.run.serve",
    "gpumosaic.experiments.sim_vs_live.rounds",
    "gpumosaic.experiments.sim_vs_live.agreement",
)


@pytest.mark.parametrize("argv", SPEC_MISTAKES, ids=" ".join)
def test_a_spec_mistake_is_refused_before_numpy_loads(
    tmp_path: Path, argv: tuple[str, ...]
) -> None:
    args = [a.replace("{out}", str(tmp_path / "out")) for a in argv]
    modules = loaded(tmp_path, *args, code=2)
    assert top_level(modules, NEVER_FOR_A_SPEC + SPEC_ONLY) == []


@pytest.mark.parametrize(
    "text",
    [
        "arrival_s,num_gpu,duration_s\n0,1,60\n0,1e12,60\n",  # a bad number, row 3
        "arrival_s,num_gpu,steps,job_type\n0,1,60,A3D\n",  # an unknown job type
        None,  # no such file
    ],
    ids=["bad-row", "job-type", "missing"],
)
def test_a_job_list_mistake_is_refused_before_numpy_loads(tmp_path: Path, text: str | None) -> None:
    jobs = tmp_path / "jobs.csv"
    if text is not None:
        jobs.write_text(text)
    modules = loaded(tmp_path, "simulate", "--workload", str(jobs), code=2)
    # The job-list reader's yaml is allowed (it reads YAML lists too); nothing else.
    expected = tuple(n for n in NEVER_FOR_A_SPEC if n != "yaml")
    assert top_level(modules, expected + SPEC_ONLY) == []


def test_the_mechanism_registry_loads_no_simulator() -> None:
    # The registry is imported to validate every description; a plug-in imports its
    # simulator in simulate() only (mechanisms/contract.py).
    # Each mechanism's package and plug-in load; its decision and simulator do not.
    light = ("__init__", "contract", "plugin", "config")
    code = (
        "import sys; import gpumosaic.run.registry as m; m.mechanism_names(); "
        "print(sorted(n for n in sys.modules if n == 'numpy' or n.startswith("
        "('gpumosaic.engine', 'gpumosaic.mechanisms.', 'gpumosaic.policies.')) "
        f"and n.rsplit('.', 1)[-1] not in {light!r} "
        "and not (n.startswith('gpumosaic.mechanisms.') and n.count('.') == 2)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout


@pytest.mark.parametrize(
    "grid",
    [
        'cluster = "v100:x"\nworkload = "gavel:jobs=5"',
        'cluster = "v100:4"\nworkload = "gavel:jobs=abc"',
        'cluster = "v100:4"\nworkload = "gavel:jobs=5"\nplacement = "fgdd"',
        'cluster = "v100:4"\nworkload = "gavel:jobs=5"\nsharing = "nvshare:tq=-1"',
    ],
    ids=["cluster", "workload", "placement", "sharing"],
)
def test_a_study_files_spec_mistake_is_refused_before_numpy_loads(
    tmp_path: Path, grid: str
) -> None:
    study = tmp_path / "study.toml"
    study.write_text(f'[experiment]\nname = "x"\n\n[grid]\n{grid}\n')
    modules = loaded(tmp_path, "run", str(study), "--out", str(tmp_path / "out"), code=2)
    # The study kind's grid is checked without its runs' imports (Parquet, the simulators).
    assert top_level(modules, NEVER_FOR_A_SPEC + SPEC_ONLY) == []
