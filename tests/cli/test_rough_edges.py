"""Issue 36's rough edges, one test each: a binary experiment file, the extender on a busy
port, report/query/explain on a compare folder, simulate's wall-time row, the fill
table's last row, and the docs' curl of /state (each one line, or bounded)."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

from typer.testing import CliRunner

from gpumosaic.cli.app import app

ROOT = Path(__file__).resolve().parents[2]


def one_error(args: list[str]) -> str:
    result = CliRunner().invoke(app, args)
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


def test_a_binary_experiment_file_is_one_line(tmp_path: Path) -> None:
    binary = tmp_path / "x.toml"
    binary.write_bytes(bytes(range(256)) * 8)
    line = one_error(["run", str(binary)])
    assert "not a text file" in line and str(binary) in line


def test_the_extender_on_a_busy_port_is_one_line(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        line = one_error(
            ["extender", "--cluster", "v100:2", "--port", str(port), "--host", "127.0.0.1",
             "--db", str(tmp_path / "x.db")]
        )  # fmt: skip
    assert f"--port {port}: cannot listen on 127.0.0.1:{port}" in line
    assert "address already in use" in line
    assert not (tmp_path / "x.db").exists()  # refused before any work


def test_report_query_and_explain_read_a_compare_folder(tmp_path: Path) -> None:
    """A placement comparison stores its runs in the result store, as ``gpumosaic run``:
    report, query and explain read its folder (they refused it before)."""
    done = CliRunner().invoke(
        app, ["compare", "--placements", "fgd", "--seeds", "0", "--workers", "1",
              "--workload", "gavel:jobs=3,rate=0", "--out", str(tmp_path)]
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    report = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert report.exit_code == 0 and (tmp_path / "report.html").is_file(), report.output
    query = CliRunner().invoke(
        app, ["query", str(tmp_path), "SELECT run_id, placement, completed FROM runs", "--json"]
    )
    assert query.exit_code == 0, query.output
    (row,) = json.loads(query.output)
    assert (row["placement"], row["completed"]) == ("fgd", 3), row
    story = CliRunner().invoke(app, ["explain", str(tmp_path), "--job", "0"])
    assert story.exit_code == 0 and "job 0" in story.output, story.output


def test_a_fill_comparison_folder_says_what_to_do_with_it(tmp_path: Path) -> None:
    (tmp_path / "experiment.toml").write_text("# written by gpumosaic compare\n")
    line = one_error(["report", str(tmp_path)])
    assert "a compare folder, not a result store" in line, line
    assert f"gpumosaic run {tmp_path / 'experiment.toml'} --out {tmp_path}" in line


def test_simulate_names_its_wall_time_as_the_simulations() -> None:
    result = CliRunner().invoke(app, ["simulate", "--workload", "gavel:jobs=3,rate=0"])
    assert result.exit_code == 0, result.output
    assert "simulation wall time" in result.output
    assert not re.search(r"│ wall time", result.output)


NODES = "sn,cpu_milli,memory_mib,gpu,model\nn0,32000,65536,2,T4\nn1,64000,65536,4,V100M16\n"
TASKS = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n" + "".join(
    f"p{i},4000,1024,1,{500 if i % 2 else 1000}\n" for i in range(12)
)


def test_the_fill_table_prints_each_arrived_level_once(tmp_path: Path) -> None:
    (tmp_path / "n.csv").write_text(NODES)
    (tmp_path / "t.csv").write_text(TASKS)
    result = CliRunner().invoke(
        app, ["fill", "--nodes", str(tmp_path / "n.csv"), "--tasks", str(tmp_path / "t.csv")],
        env={"COLUMNS": "100"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    cells = [line.split("│")[1] for line in result.output.splitlines() if line.startswith("│")]
    arrived = [c.strip() for c in cells if re.fullmatch(r"\s*[\d.]+\s*", c)]
    assert arrived and len(arrived) == len(set(arrived)), arrived


def test_the_docs_curl_of_state_is_bounded() -> None:
    """/state is one JSON line of hundreds of KB: ``| head`` alone prints all of it."""
    for line in (ROOT / "docs" / "kubernetes.md").read_text().splitlines():
        if "curl" in line and "/state" in line and not line.startswith(("`", "-")):
            assert "json.tool | head" in line, line
