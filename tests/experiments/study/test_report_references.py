"""A report leads with what carries over from a reference (issue 36): where references
come as a set, the ratio columns come first and the absolute difference is marked as
such, not coloured as an error."""

from __future__ import annotations

import re
from pathlib import Path

from study_builders import TINY_SIMULATE, experiment

from gpumosaic.experiments.report.page import build_report
from gpumosaic.experiments.study.execute import execute

SET = """
[[reference]]
where = { placement = "strided" }
metric = "avg_jct_s"
value = 2000.0
source = "a paper with its own job draw"

[[reference]]
where = { placement = "fgd" }
metric = "avg_jct_s"
value = 1900.0
source = "a paper with its own job draw"
"""


def test_a_reference_set_leads_with_its_ratios(tmp_path: Path) -> None:
    text = TINY_SIMULATE.split("[[reference]]")[0] + SET
    execute(experiment(tmp_path, text), tmp_path / "out")
    html = build_report(tmp_path / "out").path.read_text()
    table = html.split('id="reference-table"')[1].split("</table>")[0]
    heads = re.findall(r"<th>(.*?)</th>", table)
    assert heads.index("ratio error") < heads.index("ours") < heads.index("absolute difference")
    assert "error" not in heads  # no unqualified error column
    rows = re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1])
    assert len(rows) == 2
    for row in rows:
        absolute = re.findall(r"<td class='num absolute'>(.*?)</td>", row)
        assert len(absolute) == 1 and absolute[0].endswith("(absolute)"), row
    fgd = next(r for r in rows if "fgd" in r)
    assert "strided" in fgd  # its ratio to the set's first row
    assert "what carries over" in html.split('id="reference"')[1].split("</p>")[0]
