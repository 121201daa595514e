"""``build_report(DIR)``: DIR/report.html, one self-contained page (plotly inlined; no
network needed to open it)."""

from __future__ import annotations

import html
import json
import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from gpumosaic.errors import InputError
from gpumosaic.experiments.report.figures import Figure, figures
from gpumosaic.experiments.report.mosaic import mosaic_figure
from gpumosaic.experiments.report.stats import number
from gpumosaic.experiments.report.tables import grid_rows, reason_table, reference_rows
from gpumosaic.experiments.report.units import display
from gpumosaic.experiments.report.view import StudyView, load_view

REPORT_FILE = "report.html"


@dataclass(frozen=True, slots=True)
class ReportOutcome:
    path: Path
    runs: int
    figures: int
    bytes: int
    elapsed_s: float


def build_report(root: Path) -> ReportOutcome:
    started = time.perf_counter()
    try:
        from plotly.offline import get_plotlyjs
    except ImportError:
        raise InputError("the report needs plotly: pip install 'gpumosaic[report]'") from None
    view = load_view(root)
    figs = figures(view)
    mosaic = mosaic_figure(view)
    page = _page(view, figs, mosaic, get_plotlyjs())
    path = root / REPORT_FILE
    path.write_text(page, encoding="utf-8")
    return ReportOutcome(
        path,
        len(view.runs),
        len(figs) + (mosaic is not None),
        path.stat().st_size,
        time.perf_counter() - started,
    )


def _e(text: object) -> str:
    return html.escape(str(text))


def _num(value: float) -> str:
    return number(value)


def _metric_head(metric: str) -> str:
    """The CLI's words and unit; the stored name (for ``gpumosaic query``) on hover."""
    return f'<th title="{_e(metric)}">{_e(display(metric).label)}</th>'


def _grid_section(view: StudyView) -> str:
    rows = grid_rows(view)
    shown = [display(m) for m in view.metrics]
    head = "<th>group</th><th>runs</th>" + "".join(_metric_head(m) for m in view.metrics)
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="num" data-v="{d.value(c.mean)}">{_e(c.scaled(d.scale).text(4))}</td>'
            for c, d in zip(row.cells, shown, strict=True)
        )
        body.append(f"<tr><td>{_e(row.group)}</td><td class='num'>{row.runs}</td>{cells}</tr>")
    grouped = ", ".join(view.group_axes) or "nothing (one group)"
    return (
        f'<section id="grid"><h2>Grid: mean ± 95% interval over seeds</h2>'
        f"<p class='note'>One row per {_e(grouped)}; the interval is Student's t over the "
        f"group's runs (none with one run). Click a column to sort.</p>"
        f'<table class="sortable" id="grid-table"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></section>"
    )


def _error_cell(err: float) -> str:
    cls = "" if math.isnan(err) else ("good" if abs(err) <= 2 else "off")
    return f"<td class='num {cls}'>{'-' if math.isnan(err) else f'{err:+.2f}%'}</td>"


def _absolute_cell(err: float) -> str:
    """An absolute difference where a ratio is what carries over: shown, not judged."""
    text = "-" if math.isnan(err) else f"{err:+.2f}% (absolute)"
    return f"<td class='num absolute'>{text}</td>"


def _reference_section(view: StudyView) -> str:
    """Ours beside the reference. Where references come as a set, the ratios lead (what
    carries over from another job draw or machine) and the absolute differences follow,
    marked as such and not coloured as errors."""
    rows = reference_rows(view)
    if not rows:
        return ""
    ratios = any(r.ratio is not None for r in rows)
    body = []
    for r in rows:
        d = display(r.metric)
        cells = f"<tr><td>{_e(r.where)}</td><td title='{_e(r.metric)}'>{_e(d.label)}</td>"
        if ratios:
            q = r.ratio
            if q is None:
                cells += "<td>(the base of the ratios)</td><td></td><td></td><td></td>"
            else:
                cells += (
                    f"<td>{_e(q.base)}</td><td class='num'>{_num(q.ours)}</td>"
                    f"<td class='num'>{_num(q.reference)}</td>{_error_cell(q.error_pct)}"
                )
        cells += (
            f"<td class='num'>{_e(r.ours.scaled(d.scale).text(4))}</td><td class='num'>{r.ours.n}"
            f"</td><td class='num'>{_num(d.value(r.reference))}</td>"
            + (_absolute_cell(r.error_pct) if ratios else _error_cell(r.error_pct))
        )
        body.append(cells + f"<td>{_e(r.source)}</td></tr>")
    names = ["runs", "metric"]
    if ratios:
        names += ["ratio to", "ours, ratio", "reference, ratio", "ratio error"]
    names += ["ours", "n", "reference", "absolute difference" if ratios else "error"]
    head = "".join(f"<th>{h}</th>" for h in (*names, "source"))
    note = "Ours: mean ± 95% interval over the matching runs; error = ours / reference - 1."
    if ratios:
        note = (
            "These references come as a set (one metric, one source): what carries over is "
            "each row's ratio to the set's first row (ours against the reference's, first), "
            "when absolute values cannot (another job draw, another machine). The absolute "
            "values follow, their difference marked as absolute. Ours: mean ± 95% interval "
            "over the matching runs; ratio error = our ratio / the reference's - 1."
        )
    return (
        '<section id="reference"><h2>Ours beside the reference</h2>'
        f"<p class='note'>{note}</p>"
        f'<table class="sortable" id="reference-table"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></section>"
    )


def _reasons_section(view: StudyView) -> str:
    table = reason_table(view)
    if not table.rows:
        return ""
    if not table.reasons:
        return (
            '<section id="reasons"><h2>Why jobs waited or were rejected</h2>'
            "<p>No job waited or was rejected in any run.</p></section>"
        )
    head = "".join(f"<th>{_e(h)}</th>" for h in ("run", "jobs", *table.reasons))
    body = "".join(
        f"<tr><td>{_e(r.run)}</td><td class='num'>{r.jobs}</td>"
        + "".join(f"<td class='num'>{c or ''}</td>" for c in r.counts)
        + "</tr>"
        for r in table.rows
    )
    return (
        '<section id="reasons"><h2>Why jobs waited or were rejected</h2>'
        "<p class='note'>Per run, jobs counted by their verdict at the end of the run "
        "(status: the filter that rejected them); <i>queued, then started</i> counts jobs "
        "that waited before they ran (the simulators keep only the final verdict of a job, "
        "not each wait's cause). <code>gpumosaic explain DIR --job ID</code> tells one "
        "job's story.</p>"
        f"<details open><summary>{len(table.rows)} runs</summary>"
        f'<table class="sortable" id="reasons-table"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></details></section>"
    )


def _notes_section(view: StudyView) -> str:
    noted = view.runs[view.runs["notes"].fillna("") != ""]
    if noted.empty:
        return ""
    body = "".join(
        f"<tr><td>{_e(view.run_label(r))}</td><td>{_e(r['notes'])}</td></tr>"
        for _, r in noted.iterrows()
    )
    return (
        '<section id="notes"><h2>Run notes (fallbacks, rejections)</h2>'
        f"<details><summary>{len(noted)} runs with notes</summary>"
        f"<table><thead><tr><th>run</th><th>notes</th></tr></thead><tbody>{body}</tbody>"
        "</table></details></section>"
    )


def _others(view: StudyView) -> str:
    if not view.others:
        return ""
    return (
        f"<p>{view.others} more runs stored in this folder are not in its experiment file "
        "(an earlier version of it): not shown here, still in <code>runs</code> for "
        "gpumosaic query.</p>"
    )


def _figure_div(fig: Figure) -> str:
    return (
        f'<figure class="plot"><div id="{_e(fig.id)}" class="plotly-target"></div>'
        f"<figcaption>{_e(fig.caption)}</figcaption></figure>"
    )


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2330;
background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:18px 32px}
header h1{margin:0 0 4px;font-size:22px} header p{margin:2px 0;color:#c9d1e0}
main{padding:8px 32px 40px;max-width:1400px}
section{background:#fff;border-radius:8px;padding:12px 20px;margin:16px 0;
box-shadow:0 1px 3px rgba(0,0,0,.08)}
h2{font-size:17px;margin:6px 0 8px}
table{border-collapse:collapse;font-size:13px;margin:6px 0}
th,td{padding:4px 10px;border-bottom:1px solid #e3e6eb;text-align:left;white-space:nowrap}
th{background:#eef1f5;cursor:pointer;position:sticky;top:0} td.num{text-align:right;
font-variant-numeric:tabular-nums}
td.good{color:#1a7f37} td.off{color:#b3261e;font-weight:600}
.note{color:#5b6474;font-size:13px;margin:4px 0 8px}
.plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(560px,1fr));gap:12px}
figure{margin:0} figcaption{color:#5b6474;font-size:12px;margin:2px 8px 8px}
pre{background:#f0f2f5;padding:10px;overflow:auto;font-size:12px}
nav a{color:#9cc3ff;margin-right:14px;font-size:13px}
"""

_JS = """
(function(){
  var figs = JSON.parse(document.getElementById('figure-data').textContent);
  var config = {responsive: true, displaylogo: false};
  figs.forEach(function(f){ Plotly.newPlot(f.id, f.spec.data, f.spec.layout, config); });
  document.querySelectorAll('table.sortable th').forEach(function(th, i){
    th.addEventListener('click', function(){
      var table = th.closest('table'), body = table.tBodies[0];
      var idx = Array.prototype.indexOf.call(th.parentNode.children, th);
      var asc = th.dataset.asc !== 'true'; th.dataset.asc = asc;
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function(a, b){
        var x = a.cells[idx], y = b.cells[idx];
        var u = parseFloat(x.dataset.v || x.textContent);
        var v = parseFloat(y.dataset.v || y.textContent);
        var c = (isNaN(u) || isNaN(v)) ? x.textContent.localeCompare(y.textContent) : u - v;
        return asc ? c : -c;
      });
      rows.forEach(function(r){ body.appendChild(r); });
    });
  });
})();
"""


def _page(view: StudyView, figs: list[Figure], mosaic: Figure | None, plotly_js: str) -> str:
    exp = view.experiment
    all_figs = [*figs, *([mosaic] if mosaic else [])]
    data = json.dumps([{"id": f.id, "spec": f.spec} for f in all_figs], separators=(",", ":"))
    data = data.replace("</", "<\\/")
    made = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    plots = "".join(_figure_div(f) for f in figs)
    mosaic_html = (
        f'<section id="mosaic"><h2>{_e(mosaic.title)}</h2>{_figure_div(mosaic)}</section>'
        if mosaic
        else '<section id="mosaic"><h2>GPU occupancy mosaic</h2><p class="note">No run of '
        "this study stored per-GPU placements: the event-driven simulator and fill replays "
        "record them; the round-based and Gandiva simulators do not yet.</p></section>"
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(exp.name)}: gpumosaic report</title><style>{_CSS}</style>
<script>{plotly_js}</script></head>
<body><header><h1>{_e(exp.name)}</h1><p>{_e(exp.description)}</p>
<p>kind {_e(exp.kind.name)} · {len(view.runs)} runs · varying: {_e(", ".join(view.axes) or "-")}
 · {_e(made)}</p>{_others(view)}
<nav><a href="#grid">grid</a><a href="#reference">reference</a><a href="#figures">figures</a>
<a href="#mosaic">mosaic</a><a href="#reasons">reasons</a>
<a href="#experiment">experiment file</a></nav></header><main>
{_grid_section(view)}
{_reference_section(view)}
<section id="figures"><h2>Figures</h2><div class="plots">{plots}</div></section>
{mosaic_html}
{_reasons_section(view)}
{_notes_section(view)}
<section id="experiment"><h2>Experiment file</h2><details><summary>{_e(exp.path.name)}
 (rerun: gpumosaic run {_e(view.root / "experiment.toml")} --out {_e(view.root)}: into
 this folder, skipping the runs it holds)</summary>
<pre>{_e(exp.text)}</pre></details></section>
</main>
<script type="application/json" id="figure-data">{data}</script>
<script>{_JS}</script></body></html>
"""
