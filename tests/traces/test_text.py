"""User files as spreadsheets and editors save them: BOM and CRLF are read, bytes that are
not UTF-8 are one error naming the file and the row, in every reader."""

from pathlib import Path

import pytest

from gpumosaic.errors import InputError
from gpumosaic.traces.gavel_trace import load_gavel_trace
from gpumosaic.traces.joblist import load_job_list
from gpumosaic.traces.openb import load_openb_nodes
from gpumosaic.traces.text import read_user_text
from gpumosaic.workloads.throughputs import GavelThroughputTable

JOBS = "arrival_s,num_gpu,gpu_milli,duration_s\r\n0,1,500,60\r\n5,1,1000,30\r\n"
TRACE_ROW = "ResNet-18 (batch size 16)\tcmd\tdir\t--n\t0\t1000\t1\t1\t-1\t0\n"


def test_excel_csv_with_bom_and_crlf_is_read(tmp_path: Path) -> None:
    path = tmp_path / "jobs.csv"
    path.write_bytes(b"\xef\xbb\xbf" + JOBS.encode())
    job_list = load_job_list(path)
    assert [j.arrival_s for j in job_list.jobs] == [0, 5]
    assert job_list.jobs[0].gpu_milli == 500


def test_read_user_text_strips_bom_and_normalizes_line_ends(tmp_path: Path) -> None:
    path = tmp_path / "x.txt"
    path.write_bytes(b"\xef\xbb\xbfa\r\nb\rc\n")
    assert read_user_text(path) == "a\nb\nc\n"


@pytest.mark.parametrize("suffix", [".csv", ".yaml"])
def test_job_list_with_latin1_bytes_names_the_row(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"jobs{suffix}"
    body = JOBS if suffix == ".csv" else "jobs:\n  - {arrival_s: 0, num_gpu: 1}\n"
    path.write_bytes(body.encode() + "# caf\u00e9\n".encode("latin-1"))
    with pytest.raises(InputError) as err:
        load_job_list(path)
    assert err.value.row == body.count("\n") + 1 and "not UTF-8" in str(err.value)
    assert str(path) in str(err.value)


def test_gavel_trace_with_bad_bytes_names_the_row(tmp_path: Path) -> None:
    path = tmp_path / "bad.trace"
    path.write_bytes(TRACE_ROW.encode() + b"\xff\xfe\n")
    with pytest.raises(InputError) as err:
        load_gavel_trace(path, GavelThroughputTable.load())
    assert err.value.row == 2


def test_node_csv_with_bad_bytes_names_the_row(tmp_path: Path) -> None:
    path = tmp_path / "nodes.csv"
    path.write_bytes(b"sn,cpu_milli,memory_mib,gpu,model\nn0,32000,1000,1,V100\xe9\n")
    with pytest.raises(InputError) as err:
        load_openb_nodes(str(path))
    assert err.value.row == 2
