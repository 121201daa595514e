"""Gavel .trace reader: the packaged traces load; every bad row names file, line and field."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from gpumosaic.errors import InputError
from gpumosaic.traces.gavel_trace import load_gavel_trace
from gpumosaic.workloads.gavel_trace import gavel_trace_workload
from gpumosaic.workloads.throughputs import GavelThroughputTable

TABLE = GavelThroughputTable.load()

GOOD = (
    "ResNet-18 (batch size 32)\tpython3 main.py\tcifar10\t--num_steps\t1\t1000\t{sf}"
    "\t1\t-1\t{arrival}"
)


def write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "t.trace"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_packaged_minimize_makespan_trace():
    ref = resources.files("gpumosaic") / "data" / "gavel" / "traces" / "minimize_makespan.trace"
    with resources.as_file(ref) as path:
        jobs = load_gavel_trace(path, TABLE)
    assert len(jobs) == 100
    assert {j.num_gpu for j in jobs} == {1, 2, 4}
    assert all(j.arrival_s == 0 and j.gpu_milli == 1000 for j in jobs)
    assert jobs[0].job_type == "Transformer (batch size 128)" and jobs[0].work == 19605


def test_sorted_by_arrival_ids_in_file_order_and_gpu_milli_column(tmp_path):
    path = write(tmp_path, GOOD.format(sf=1, arrival=50) + "\t300", GOOD.format(sf=2, arrival=10))
    jobs = load_gavel_trace(path, TABLE)
    assert [(j.id, j.arrival_s, j.gpu_milli, j.num_gpu) for j in jobs] == [
        (1, 10.0, 1000, 2),
        (0, 50.0, 300, 1),
    ]
    workload = gavel_trace_workload(path, TABLE)
    assert workload.measure is None and len(tuple(workload.jobs)) == 2


@pytest.mark.parametrize(
    ("line", "field", "words"),
    [
        (
            GOOD.format(sf=1, arrival=0).replace("\t1000\t", "\tmany\t"),
            "total_steps",
            "not a number",
        ),
        (GOOD.format(sf=1, arrival=0).replace("\t1000\t", "\t-5\t"), "total_steps", "negative"),
        (
            GOOD.format(sf=1, arrival=0).replace("ResNet-18", "ResNet-19"),
            "job_type",
            "unknown job type",
        ),
        (GOOD.format(sf=1, arrival=0) + "\t0", "gpu_milli", "1..1000"),
        (GOOD.format(sf=1, arrival=0) + "\t1001", "gpu_milli", "1..1000"),
        (GOOD.format(sf=2, arrival=0) + "\t500", "gpu_milli", "whole GPUs"),
        (GOOD.format(sf=0, arrival=0), "scale_factor", ">= 1"),
        (GOOD.format(sf=1, arrival=-3), "arrival_time", "negative"),
    ],
)
def test_bad_field_names_file_row_and_field(tmp_path, line, field, words):
    path = write(tmp_path, GOOD.format(sf=1, arrival=0), line)
    with pytest.raises(InputError) as err:
        load_gavel_trace(path, TABLE)
    assert err.value.row == 2 and err.value.field == field
    assert words in str(err.value) and str(path) in str(err.value)


def test_wrong_column_count(tmp_path):
    path = write(tmp_path, "ResNet-18 (batch size 32)\tpython3\t1000")
    with pytest.raises(InputError, match="expected 10 tab-separated columns") as err:
        load_gavel_trace(path, TABLE)
    assert err.value.row == 1


def test_missing_file_and_empty_file(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        load_gavel_trace(tmp_path / "nope.trace", TABLE)
    with pytest.raises(InputError, match="no jobs"):
        load_gavel_trace(write(tmp_path, "# only a comment"), TABLE)
