"""The run, query, report and explain commands on tiny studies."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from study_builders import TINY_NVSHARE, write
from typer.testing import CliRunner

from gpumosaic.cli import app
from gpumosaic.experiments.study.presets import PRESETS

runner = CliRunner()


def test_run_lists_presets() -> None:
    result = runner.invoke(app, ["run", "--list", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [r["name"] for r in rows] == list(PRESETS)
    assert next(r for r in rows if r["name"] == "fgd-openb")["runs"] == 70


def test_run_then_rerun_resumes(tmp_path: Path) -> None:
    path = write(tmp_path, TINY_NVSHARE)
    out = tmp_path / "out"
    first = runner.invoke(app, ["run", str(path), "--out", str(out), "--json"])
    assert first.exit_code == 0, first.output
    assert json.loads(first.output) | {"elapsed_s": 0} == {
        "experiment": "tiny-nvshare", "out": str(out), "planned": 6, "skipped": 0, "ran": 6,
        "failed": [], "elapsed_s": 0,
    }  # fmt: skip
    again = json.loads(runner.invoke(app, ["run", str(path), "--out", str(out), "--json"]).output)
    assert (again["skipped"], again["ran"]) == (6, 0)


def test_run_bad_file_is_one_line_exit_2(tmp_path: Path) -> None:
    path = write(tmp_path, TINY_NVSHARE.replace('setup = ["serial", "on"]', 'setup = ["of"]'))
    result = runner.invoke(app, ["run", str(path), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert f"{path}: line 7, key 'grid.setup[0]'" in result.output
    assert "Traceback" not in result.output


def test_query_runs_table_as_json(tiny_store: Path) -> None:
    sql = (
        "SELECT placement, count(*) AS n, avg(avg_jct_s) AS jct FROM runs "
        "GROUP BY placement ORDER BY placement"
    )
    result = runner.invoke(app, ["query", str(tiny_store), sql, "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [(r["placement"], r["n"]) for r in rows] == [("fgd", 2), ("strided", 2)]
    assert all(r["jct"] > 0 for r in rows)
    jobs = runner.invoke(
        app, ["query", str(tiny_store), "SELECT count(*) AS n FROM jobs JOIN runs USING (run_id)",
              "--json"],
    )  # fmt: skip
    assert json.loads(jobs.output) == [{"n": 24}]


def test_query_errors(tiny_store: Path, tmp_path: Path) -> None:
    bad = runner.invoke(app, ["query", str(tiny_store), "SELECT nope FROM runs"])
    assert bad.exit_code == 2 and "SQL" in bad.output
    empty = runner.invoke(app, ["query", str(tmp_path), "SELECT 1"])
    assert empty.exit_code == 2 and "not a result folder" in empty.output


def test_explain_tells_a_jobs_story(tiny_store: Path) -> None:
    runs = json.loads(
        runner.invoke(
            app, ["query", str(tiny_store), "SELECT run_id FROM runs WHERE placement = 'fgd' "
                  "AND seed = 0", "--json"],
        ).output
    )  # fmt: skip
    run_id = runs[0]["run_id"]
    jobs = json.loads(
        runner.invoke(
            app, ["query", str(tiny_store), f"SELECT job_id FROM jobs WHERE run_id = '{run_id}' "
                  "AND queueing_s > 0 ORDER BY job_id", "--json"],
        ).output
    )  # fmt: skip
    job = jobs[0]["job_id"]
    result = runner.invoke(
        app, ["explain", str(tiny_store), "--job", str(job), "--run", run_id[:6], "--json"]
    )
    assert result.exit_code == 0, result.output
    story = json.loads(result.output)
    text = "\n".join(story["verdicts"])
    assert "arrived" in text and "queued" in text and "started on node" in text
    assert "completed" in text and "not recorded" in story["missing"]
    several = runner.invoke(app, ["explain", str(tiny_store), "--job", "0"])
    assert several.exit_code == 2 and "--run" in several.output
    missing = runner.invoke(app, ["explain", str(tiny_store), "--job", "999", "--run", run_id])
    assert missing.exit_code == 2 and "no job 999" in missing.output


def test_report_has_its_tables_and_figures(tiny_store: Path) -> None:
    result = runner.invoke(app, ["report", str(tiny_store), "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    html = (tiny_store / "report.html").read_text()
    assert info["bytes"] < 10_000_000
    for section in ("grid-table", "reference-table", "reasons-table", 'id="mosaic"',
                    "jct-cdf", "time-allocation_rate", "bars-avg_jct_s"):  # fmt: skip
        assert section in html
    assert "http://" not in html.split("<script>")[0]  # nothing fetched: plotly is inline
    figures = json.loads(
        re.search(r'id="figure-data">(.*?)</script>', html, re.S).group(1)  # type: ignore[union-attr]
    )
    assert len(figures) == info["figures"]
    mosaic = next(f for f in figures if f["id"] == "mosaic-plot")
    z = mosaic["spec"]["data"][0]["z"]
    assert len(z) == 2 and max(max(row) for row in z) <= 1000  # 2 GPUs, never over 1000
    # Names and units as the CLI prints them: hours, %.
    grid = html.split('id="grid-table"')[1].split("</table>")[0]
    assert '<th title="avg_jct_s">avg JCT (h)</th>' in grid
    assert '<th title="utilization">GPU utilization (%)</th>' in grid
    bars = next(f for f in figures if f["id"] == "bars-avg_jct_s")["spec"]
    assert bars["layout"]["yaxis"]["title"]["text"] == "avg JCT (h)"
    runs = pd.read_parquet(tiny_store / "runs.parquet")
    strided = runs.loc[runs["placement"] == "strided", "avg_jct_s"].mean() / 3600
    assert math.isclose(bars["data"][0]["y"][0], strided, rel_tol=1e-3)
    util = next(f for f in figures if f["id"] == "time-allocation_rate")["spec"]
    assert util["layout"]["yaxis"]["range"] == [0, 100]
    assert 1 < max(y for t in util["data"] for y in t["y"] if y is not None) <= 100
    for figure in figures:  # axis titles stand off the tick labels, however long
        axes = figure["spec"]["layout"]
        assert axes["xaxis"]["automargin"] and axes["yaxis"]["automargin"], figure["id"]


@pytest.mark.skipif(
    shutil.which("chromium") is None,
    reason="Debian's chromium is not installed (apt-get install -y chromium, or make browser)",
)
@pytest.mark.slow
def test_report_renders_in_headless_chromium_without_console_errors(tiny_store: Path) -> None:
    runner.invoke(app, ["report", str(tiny_store)])
    page = (tiny_store / "report.html").resolve()
    done = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
         "--v=0", "--virtual-time-budget=10000", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []  # the page logs nothing: no error, no warning
    figures = json.loads(
        re.search(r'id="figure-data">(.*?)</script>', page.read_text(), re.S).group(1)  # type: ignore[union-attr]
    )
    # Every figure was drawn by plotly into its own element, every table is there.
    assert done.stdout.count('class="plot-container plotly"') == len(figures)
    for figure in figures:
        drawn = re.search(
            f'<div id="{figure["id"]}" class="plotly-target js-plotly-plot"', done.stdout
        )
        assert drawn, figure["id"]
    for table in ("grid-table", "reference-table", "reasons-table"):
        assert f'id="{table}"' in done.stdout


# Every axis title's box against every tick label's box of its axis, as drawn.
_OVERLAPS = """(function(){var bad = [];
document.querySelectorAll('.js-plotly-plot').forEach(function(p){['x','y'].forEach(function(a){
  var t = p.querySelector('.' + a + 'title'); if (!t) return; var r = t.getBoundingClientRect();
  p.querySelectorAll('.' + a + 'tick text').forEach(function(k){var q = k.getBoundingClientRect();
    if (q.width && r.left < q.right && q.left < r.right && r.top < q.bottom && q.top < r.bottom)
      bad.push(p.id + ' ' + a + ': ' + k.textContent);});});});
return [document.querySelectorAll('.js-plotly-plot').length, bad];})()"""


def _stress_page(path: Path) -> None:
    """Bar charts as the report lays them out, with what pushes axis titles onto tick
    labels: long category names (drawn at an angle) and eight-digit values."""
    from plotly.offline import get_plotlyjs

    from gpumosaic.experiments.report.figures import category_layout

    specs = []
    # (8, 12): eight 12-character names on a 560 px figure (the page's narrowest) put
    # plotly's auto-rotated tick labels on the x title of a layout without automargin.
    for n, width in ((3, 30), (12, 18), (8, 12), (4, 8)):
        labels = [f"placement=fgd sharing=interference {i}"[: width - 1] + str(i) for i in range(n)]
        layout = category_layout("stress", labels, "placement, sharing", "energy (kWh)")
        bars = {"type": "bar", "x": labels, "y": [12_345_678.0 + i for i in range(n)]}
        specs.append({"data": [bars], "layout": layout})
    divs = "".join(f'<div id="p{i}"></div>' for i in range(len(specs)))
    draw = "".join(
        f"Plotly.newPlot('p{i}', {json.dumps(s['data'])}, {json.dumps(s['layout'])});"
        for i, s in enumerate(specs)
    )
    path.write_text(
        f"<html><head><script>{get_plotlyjs()}</script></head><body style='width:560px'>"
        f"{divs}<script>{draw}</script></body></html>"
    )


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("chromium") is None,
    reason="Debian's chromium is not installed (apt-get install -y chromium, or make browser)",
)
def test_no_axis_title_overlaps_its_tick_labels(tiny_store: Path) -> None:
    pytest.importorskip("websocket")
    sys.path.insert(0, str(Path(__file__).parents[2] / "runtime" / "ui"))
    from browser import Browser

    runner.invoke(app, ["report", str(tiny_store)])
    stress = tiny_store.parent / "axes-stress.html"
    _stress_page(stress)
    browser = Browser(width=1300, height=900)
    try:
        browser.open((tiny_store / "report.html").resolve().as_uri())
        browser.wait_for("document.querySelectorAll('.js-plotly-plot').length > 5", 60, "plots")
        plots, overlaps = browser.js(_OVERLAPS)
        assert plots > 5 and overlaps == []
        browser.open(stress.resolve().as_uri())
        browser.wait_for("document.querySelectorAll('.js-plotly-plot').length === 4", 60, "plots")
        plots, overlaps = browser.js(_OVERLAPS)
        assert plots == 4 and overlaps == []
    finally:
        browser.close()
