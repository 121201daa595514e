"""openb loaders: packaged lists, gpu_spec, times, and errors that name file, row and field."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpumosaic.errors import InputError
from gpumosaic.traces.openb import (
    load_openb_nodes,
    load_openb_tasks,
    packaged_task_lists,
    read_openb_trace,
)

POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
)
NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model\n"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_packaged_gpu_cluster() -> None:
    spec = load_openb_nodes("openb:gpu")
    assert len(spec.nodes) == 1213 and spec.num_gpus == 6212
    assert spec.gpus_per_model()["G2"] == 549 * 8
    all_nodes = load_openb_nodes("openb:all")
    assert len(all_nodes.nodes) == 1523 and all_nodes.num_gpus == 6212


def test_packaged_task_lists() -> None:
    assert {"default", "gpushare40", "multigpu20", "cpu050", "gpuspec33"} <= set(
        packaged_task_lists()
    )
    jobs = load_openb_tasks("openb:default")
    assert len(jobs) == 8152
    assert sum(j.total_gpu_milli for j in jobs) == 6_086_800
    assert all(j.gpu_milli == 1000 for j in jobs if j.num_gpu > 1)
    assert all(j.gpu_milli == 0 for j in jobs if j.num_gpu == 0)
    multi = read_openb_trace("openb:multigpu20")  # only 5 columns: no times, no gpu_spec
    assert len(multi.jobs) == 8324 and np.isnan(multi.times.creation_s).all()
    assert all(j.arrival_s == 0 and j.work == 0 for j in multi.jobs)
    spec33 = load_openb_tasks("openb:gpuspec33")
    assert any(j.allowed_models is not None and len(j.allowed_models) > 1 for j in spec33)


def test_fields_times_and_gpu_spec(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "pods.csv",
        POD_HEADER
        + "p0,4000,1024,1,500,V100M16|T4,LS,Running,10,110,30\n"
        + "p1,8000,2048,2,1000,,BE,Pending,20,50,\n"
        + "p2,1000,0,0,0,,BE,Succeeded,5,,6\n",
    )
    trace = read_openb_trace(str(path))
    p0, p1, p2 = trace.jobs
    assert (p0.id, p0.name, p0.num_gpu, p0.gpu_milli, p0.cpu_milli, p0.memory_mib) == (
        0, "p0", 1, 500, 4000, 1024,
    )  # fmt: skip
    assert p0.allowed_models == frozenset({"V100M16", "T4"})
    assert p0.arrival_s == 10 and p0.work == 80  # deletion 110 - scheduled 30
    assert p1.work == 30  # never scheduled: deletion 50 - creation 20
    assert p2.work == 0 and p2.num_gpu == 0  # no deletion time
    assert trace.times.pod_phase == ("Running", "Pending", "Succeeded")
    assert np.isnan(trace.times.scheduled_s[1]) and trace.times.deletion_s[0] == 110


@pytest.mark.parametrize(
    ("body", "row", "field", "message"),
    [
        (
            "p0,4000,1024,1,500\np1,abc,1024,1,500\n",
            2,
            "cpu_milli",
            "not a number: 'abc' (data row 2, line 3)",
        ),
        ("p0,4000,-5,1,500\n", 1, "memory_mib", "must not be negative"),
        ("p0,4000,1024,1,1500\n", 1, "gpu_milli", "must be in 1..1000"),
        ("p0,4000,1024,1,0\n", 1, "gpu_milli", "must be in 1..1000"),
        ("p0,4000,1024,2,500\n", 1, "gpu_milli", "multi-GPU task"),
        ("p0,4000,1024,1.5,500\n", 1, "num_gpu", "whole number"),
        ("p0,,1024,1,500\n", 1, "cpu_milli", "empty value"),
    ],
)
def test_bad_pod_values(tmp_path: Path, body: str, row: int, field: str, message: str) -> None:
    path = write(tmp_path, "bad.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n" + body)
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        load_openb_tasks(str(path))
    assert (err.value.path, err.value.row, err.value.field) == (str(path), row, field)
    assert (
        str(path) in str(err.value) and f"row {row}" in str(err.value) and field in str(err.value)
    )


def test_unknown_gpu_spec(tmp_path: Path) -> None:
    path = write(tmp_path, "pods.csv", POD_HEADER + "p0,1,1,1,500,T4|H100,LS,Running,0,1,0\n")
    with pytest.raises(InputError, match="unknown GPU model 'H100'") as err:
        load_openb_tasks(str(path))
    assert (err.value.row, err.value.field) == (1, "gpu_spec")


def test_missing_column(tmp_path: Path) -> None:
    path = write(tmp_path, "pods.csv", "name,cpu_milli,memory_mib,num_gpu\np0,1,1,1\n")
    with pytest.raises(InputError, match="missing column") as err:
        load_openb_tasks(str(path))
    assert (err.value.path, err.value.row, err.value.field) == (str(path), None, "gpu_milli")


def test_bad_node_lists(tmp_path: Path) -> None:
    path = write(tmp_path, "nodes.csv", NODE_HEADER + "n0,8000,100,2,T4\nn1,8000,100,2,X9\n")
    with pytest.raises(InputError, match="unknown GPU model 'X9'") as err:
        load_openb_nodes(str(path))
    assert (err.value.row, err.value.field) == (2, "model")
    path = write(tmp_path, "nodes2.csv", NODE_HEADER + "n0,8000,100,two,T4\n")
    with pytest.raises(InputError, match="not a number") as err:
        load_openb_nodes(str(path))
    assert (err.value.row, err.value.field) == (1, "gpu")
    path = write(tmp_path, "nodes3.csv", NODE_HEADER + "n0,8000,100,2,\n")
    with pytest.raises(InputError, match="needs a GPU model"):
        load_openb_nodes(str(path))
    path = write(tmp_path, "nodes4.csv", "sn,cpu_milli,gpu,model\nn0,1,1,T4\n")
    with pytest.raises(InputError, match="missing column") as err:
        load_openb_nodes(str(path))
    assert err.value.field == "memory_mib"


def test_unknown_specs() -> None:
    with pytest.raises(InputError, match="unknown task list 'openb:nope'"):
        load_openb_tasks("openb:nope")
    with pytest.raises(InputError, match="unknown node list"):
        load_openb_nodes("openb:cpu")
    with pytest.raises(InputError, match="no such tasks file"):
        load_openb_tasks("/no/such/file.csv")
