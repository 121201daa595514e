"""Our job-list format: good files load, bad ones name file, row and field."""

from pathlib import Path

import pytest

from gpumosaic.errors import InputError
from gpumosaic.traces.joblist import load_job_list

HEADER = "arrival_s,num_gpu,gpu_milli,duration_s,cpu_milli,gpu_spec\n"


def write(tmp_path: Path, text: str, name: str = "jobs.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_csv_loads_sorted_by_arrival(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + "5,1,500,60,2000,V100|T4\n0,2,1000,30,0,\n")
    job_list = load_job_list(path)
    first, second = job_list.jobs
    assert (first.arrival_s, first.num_gpu, first.work) == (0, 2, 30)
    assert second.allowed_models == frozenset({"V100", "T4"})
    assert second.gpu_milli == 500 and second.cpu_milli == 2000
    assert not job_list.uses_steps
    assert job_list.row(second.id) == 2  # line 2 of the file (line 1 is the header)


def test_yaml_with_steps(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "jobs:\n  - {arrival_s: 0, num_gpu: 1, job_type: A3C, steps: 1000}\n",
        "jobs.yaml",
    )
    job_list = load_job_list(path)
    assert job_list.uses_steps and job_list.jobs[0].job_type == "A3C"


@pytest.mark.parametrize(
    "body, row, field",
    [
        ("0,1,500,-5,0,\n", 2, "duration_s"),  # negative duration
        ("0,x,500,5,0,\n", 2, "num_gpu"),  # non-numeric demand
        ("0,1,500,5,-1,\n", 2, "cpu_milli"),  # negative CPU
        ("0,1,1500,5,0,\n", 2, "gpu_milli"),  # over one GPU
        ("0,1,500,5,0,\n0,1,0,5,0,\n", 3, "gpu_milli"),  # zero milli for a GPU job
        ("0,1,500,5,0,H100X\n", 2, "gpu_spec"),  # unknown GPU model
        ("0,2,500,5,0,\n", 2, "gpu_milli"),  # multi-GPU job with a fraction
    ],
)
def test_bad_rows_name_file_row_and_field(tmp_path: Path, body: str, row: int, field: str) -> None:
    path = write(tmp_path, HEADER + body)
    with pytest.raises(InputError) as info:
        load_job_list(path)
    err = info.value
    assert (err.path, err.row, err.field) == (str(path), row, field)
    assert str(path) in str(err) and f"row {row}" in str(err) and field in str(err)


def test_missing_and_unknown_columns(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="field 'num_gpu'"):
        load_job_list(write(tmp_path, "arrival_s,duration_s\n0,5\n"))
    with pytest.raises(InputError, match="unknown column 'gpus'"):
        load_job_list(write(tmp_path, "arrival_s,num_gpu,gpus\n0,1,1\n"))


def test_work_must_be_given_exactly_once(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="exactly one of duration_s and steps"):
        load_job_list(write(tmp_path, "arrival_s,num_gpu\n0,1\n"))
    mixed = "arrival_s,num_gpu,job_type,duration_s,steps\n0,1,A3C,5,\n0,1,A3C,,9\n"
    with pytest.raises(InputError, match="row 3"):
        load_job_list(write(tmp_path, mixed))


def test_bad_yaml_and_suffix(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="list 'jobs:'"):
        load_job_list(write(tmp_path, "jobs: 3\n", "j.yaml"))
    with pytest.raises(InputError, match=r"\.csv, \.yaml"):
        load_job_list(write(tmp_path, "x", "j.txt"))
