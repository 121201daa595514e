"""Every number a user types has a bound (issue 36): a table over every command's int and
float options. Each must have an entry in cli/bounds.py, its default must lie inside it,
and a value past either end is one line naming the flag, exit 2, before any work."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from typer.main import get_group
from typer.testing import CliRunner

from gpumosaic.cli.app import COMMAND_MODULES, app
from gpumosaic.cli.bounds import BOUNDS

for _modules in COMMAND_MODULES.values():
    for _module in _modules:
        importlib.import_module(f"gpumosaic.cli.{_module}")


def _numeric_options() -> list[tuple[tuple[str, ...], Any, list[Any]]]:
    """(command path, the option, the command's required arguments) for every int or
    float parameter of every command."""
    found = []

    def walk(command: Any, path: tuple[str, ...]) -> None:
        for param in command.params:
            if param.type_descriptor.annotation in (int, float):
                required = [p for p in command.params if p.required and p is not param]
                found.append((path, param, required))
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, (*path, name))

    walk(get_group(app), ())
    return found


OPTIONS = _numeric_options()


def _id(case: tuple[tuple[str, ...], Any, list[Any]]) -> str:
    return f"{' '.join(case[0])} {case[1].name}"


def test_the_table_covers_real_options() -> None:
    assert len(OPTIONS) > 40  # every command's numbers, not a few
    names = {param.name for _, param, _ in OPTIONS}
    assert {"workers", "seed", "port", "steps", "gpu_milli"} <= names


@pytest.mark.parametrize("case", OPTIONS, ids=[_id(c) for c in OPTIONS])
def test_every_number_is_bounded_and_refused_past_its_bound(case: Any) -> None:
    path, param, required = case
    bound = BOUNDS.get(param.name)
    assert bound is not None, f"{' '.join(path)} {param.opts}: no bound in cli/bounds.py"
    if param.default is not None:  # the default is a value the bound accepts
        bound.check(param.default, param.opts[0] if param.opts else param.name)
    is_int = param.type_descriptor.annotation is int
    too_low = bound.low if bound.low_open else bound.low - 1
    too_high = bound.high + 1 if is_int else bound.high * 2 + 1

    def fill(p: Any) -> str:
        return "1" if p.type_descriptor.annotation in (int, float) else "x"

    filler = [fill(p) for p in required if p.param_type_name == "argument"]
    filler += [f"{p.opts[0]}={fill(p)}" for p in required if p.param_type_name == "option"]
    for bad in (too_low, too_high):
        text = str(int(bad)) if is_int else repr(float(bad))
        if param.param_type_name == "argument":
            args = [*path, text, *filler[1:]] if filler else [*path, text]
        else:
            args = [*path, *filler, f"{param.opts[0]}={text}"]
        result = CliRunner().invoke(app, args)
        lines = result.output.strip().splitlines()
        assert result.exit_code == 2, (args, result.output)
        assert len(lines) == 1 and "error:" in lines[0], (args, result.output)
        assert "must be" in lines[0] or "range" in lines[0], (args, lines[0])


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["compare", "--seeds", "0-1000000"], "--seeds 0-1000000: more than 10,000 seeds"),
        (["compare", "--seeds", "0,5000000000"], "past 4294967295"),
        (["compare", "--policies", "fifo", "--rates", ",".join(["1"] * 101)], "101 rates"),
        (["compare", "--policies", "fifo", "--rates", "1e9"], "--rates"),
        (["run", "--preset", "nvshare", "--workers", "-1"], "--workers -1: must be 1..1024, or 0"),
    ],
)
def test_counts_inside_text_values_are_bounded(args: list[str], expected: str) -> None:
    result = CliRunner().invoke(app, args)
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert expected in lines[0], lines[0]


def test_a_study_grid_past_the_run_limit_is_one_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    experiment = tmp_path / "huge.toml"
    experiment.write_text(
        '[experiment]\nname = "huge"\nkind = "simulate"\n\n[grid]\ncluster = "v100:4"\n'
        'workload = "gavel:jobs=5,rate=0"\npolicy = "fifo"\n'
        'placement = ["bestfit", "fgd", "firstfit", "worstfit", "random", "pwr",'
        ' "dotprod", "gpupacking", "gpuclustering", "fgdexact", "strided"]\n'
        'seed = ["0-9999"]\n'
    )
    result = CliRunner().invoke(app, ["run", str(experiment), "--out", str(tmp_path / "o")])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert "110,000 runs: at most 100,000" in lines[0], lines[0]
