"""Experiment files: a user mistake names the file, the line and the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from study_builders import TINY_NVSHARE, TINY_SIMULATE, experiment, write

from gpumosaic.errors import InputError
from gpumosaic.experiments.study.file import load_experiment
from gpumosaic.experiments.study.locate import KeyLines


def _error(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(InputError) as info:
        load_experiment(path)
    message = str(info.value)
    assert message.startswith(str(path)), message
    return message


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), start=1) if needle in line)


def test_a_tiny_grid_expands_to_its_product(tmp_path: Path) -> None:
    runs = experiment(tmp_path, TINY_SIMULATE).runs()
    assert len(runs) == 4  # 2 placements x 2 seeds
    assert len({r.run_id for r in runs}) == 4
    # nvshare: serial has no TQ, so its two TQ points are one run.
    assert len(experiment(tmp_path, TINY_NVSHARE).runs()) == 2 * (1 + 2)


def test_unknown_grid_key_names_its_line_and_the_known_keys(tmp_path: Path) -> None:
    text = TINY_SIMULATE.replace('seed = "0-1"', 'seed = "0-1"\nplacements = ["fgd"]')
    message = _error(tmp_path, text)
    assert f"line {_line_of(text, 'placements =')}, key 'grid.placements'" in message
    assert "unknown key" in message and "placement" in message


def test_a_bad_value_names_the_line_of_its_key(tmp_path: Path) -> None:
    text = TINY_SIMULATE.replace('seed = "0-1"', 'seed = ["zero"]')
    message = _error(tmp_path, text)
    assert f"line {_line_of(text, 'seed =')}, key 'grid.seed" in message


def test_an_unknown_placement_fails_before_any_run(tmp_path: Path) -> None:
    text = TINY_SIMULATE.replace('"strided", "fgd"', '"strided", "fdg"')
    message = _error(tmp_path, text)
    assert f"line {_line_of(text, 'placement = [')}, key 'grid.placement'" in message
    assert "unknown placement" in message


def test_unknown_kind_and_missing_name(tmp_path: Path) -> None:
    text = TINY_SIMULATE.replace('kind = "simulate"', 'kind = "simulation"')
    assert "line 3, key 'experiment.kind': unknown kind" in _error(tmp_path, text)
    text = TINY_SIMULATE.replace('name = "tiny"\n', "")
    assert "line 1, key 'experiment.name': missing" in _error(tmp_path, text)


def test_reference_errors_point_into_the_right_array_table(tmp_path: Path) -> None:
    text = (
        TINY_SIMULATE
        + '\n[[reference]]\nwhere = { placment = "fgd" }\nmetric = "avg_jct_s"\nvalue = 1\n'
    )
    message = _error(tmp_path, text)
    assert f"line {_line_of(text, 'placment')}, key 'reference[1].where.placment'" in message
    text = TINY_SIMULATE.replace('metric = "avg_jct_s"', 'metric = "avg_jct"')
    assert f"line {_line_of(text, 'avg_jct')}, key 'reference[0].metric'" in _error(tmp_path, text)


def test_toml_syntax_errors_keep_tomllib_line(tmp_path: Path) -> None:
    message = _error(tmp_path, TINY_SIMULATE.replace('cluster = "v100:2"', "cluster = v100:2"))
    assert "not valid TOML" in message and "line 6" in message


def test_key_lines_skip_multiline_arrays_and_count_array_tables() -> None:
    text = '[grid]\nplacement = [\n  "a",\n  "b",\n]\nseed = 1\n[[r]]\nx = 1\n[[r]]\nx = 2\n'
    lines = KeyLines(text)
    assert lines.line(("grid", "placement", 1)) == 2
    assert lines.line(("grid", "seed")) == 6
    assert lines.line(("r", 1, "x")) == 10
    assert lines.line(("grid", "nothing")) == 1  # the table that would hold it
