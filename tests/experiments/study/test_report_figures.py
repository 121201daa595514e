"""Pictures carry what tables carry, in the HTML report too (issue 36), read from the
figures' plotly JSON: every title names the cluster, workload, background and seeds its
runs share; where the compared groups finished different job sets, the bars and CDF carry
each group's count and every figure says so."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpumosaic.experiments.report.figures import figures
from gpumosaic.experiments.report.page import build_report
from gpumosaic.experiments.report.view import load_view


def titles(spec: dict[str, Any]) -> str:
    return str(spec["layout"]["title"]["text"])


def trace_names(spec: dict[str, Any]) -> list[str]:
    return [str(t["name"]) for t in spec["data"] if "name" in t]


def test_every_report_figure_names_cluster_workload_background_and_seeds(
    tiny_store: Path,
) -> None:
    view = load_view(tiny_store)
    # As a `compare --background` study's runs say (the simulate kind's background axis).
    view = replace(view, runs=view.runs.assign(background="openb:default,fraction=0.9"))
    figs = figures(view)
    assert len(figs) >= 4
    for fig in figs:
        title = titles(fig.spec)
        for part in ("cluster v100:2", "workload gavel:jobs=6,rate=0,milli=spatial",
                     "background openb:default,fraction=0.9", "seeds 0-1"):  # fmt: skip
            assert part in title, (fig.id, title)
        assert "placement" not in title.split("<br>", 1)[1]  # the series name it
        assert "different job sets" not in title + fig.caption  # both placements: 6 of 6
    # The page carries the same JSON the figures hold.
    html = build_report(tiny_store).path.read_text()
    data = json.loads(html.split('id="figure-data">')[1].split("</script>")[0])
    assert all("seeds 0-1" in titles(f["spec"]) for f in data if f["id"] != "mosaic-plot")


def test_groups_that_finished_different_job_sets_carry_their_counts(tiny_store: Path) -> None:
    view = load_view(tiny_store)
    fewer = view.runs["placement"] == "fgd"
    runs = view.runs.assign(completed=view.runs["completed"].where(~fewer, 5))
    figs = {f.id: f for f in figures(replace(view, runs=runs))}
    bars = figs["bars-avg_jct_s"]
    assert bars.spec["data"][0]["x"] == ["strided (6 of 6 jobs done)", "fgd (5 of 6 jobs done)"]
    assert "fgd (5 of 6 jobs done)" in bars.spec["data"][1]["x"]  # the reference diamond
    cdf_names = trace_names(figs["jct-cdf"].spec)
    assert "fgd (5 of 6 jobs done)" in cdf_names, cdf_names
    for fig in figs.values():
        title = titles(fig.spec)
        assert re.search(r"different job sets: strided 6 of 6 jobs done, fgd 5 of 6", title)
        assert "Different job sets" in fig.caption and "--common-jobs" in fig.caption
