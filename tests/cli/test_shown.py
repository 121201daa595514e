"""Control characters are escaped in every human output (issue 35, class 6): a job name
with a newline, an ANSI escape or rich markup is printed as visible escapes by ``jobs``,
``job`` and the error line, never interpreted by the terminal or by rich."""

from __future__ import annotations

import pytest
from rich.console import Console
from rich.table import Table

from gpumosaic.cli.shown import cell, markup_safe, shown

EVIL = "ok\x1b[2J\x1b[31mred\nforged line\r\u202eevil[bold]x[/bold]\x07"


def test_shown_escapes_every_control_character() -> None:
    text = shown(EVIL)
    assert all(ord(c) >= 0x20 and not 0x7F <= ord(c) <= 0x9F for c in text)
    assert "\\x1b[2J" in text and "\\n" in text and "\\r" in text and "\\u202e" in text
    assert shown("a\nb\tc", keep_lines=True) == "a\nb\tc"
    assert shown("tab\there") == "tab\\there"


@pytest.mark.parametrize("render", ["cell", "markup"])
def test_rich_prints_the_text_as_it_is(render: str) -> None:
    console = Console(record=True, width=400, color_system=None)
    if render == "cell":
        table = Table()
        table.add_column("name")
        table.add_row(cell(EVIL))
        console.print(table)
    else:
        console.print(f"[red]error:[/red] {markup_safe(EVIL)}")
    out = console.export_text()
    assert "[bold]x[/bold]" in out and "\x1b" not in out
    assert "forged line" in out and out.count("forged") == 1


def test_jobs_prints_a_hostile_name_escaped(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    from gpumosaic.cli import jobs as jobs_cli

    row = {
        "id": 1, "name": EVIL, "state": "queued", "steps_done": 0.0, "steps": 10.0,
        "gpu_type": None, "gpu_index": None, "attained_s": 0.0, "steps_per_s": None,
        "submitted_at": 0.0, "reason": "why\x1b]0;title\x07",
    }  # fmt: skip

    class Client:
        def __init__(self, *a: object) -> None:
            pass

        def jobs(self, *a: object) -> list[dict[str, object]]:
            return [row]

        def job(self, job_id: int) -> dict[str, object]:
            return {**row, "log_tail": "line 1\n\x1b[31mline 2\n"}

    monkeypatch.setattr(jobs_cli, "ServiceClient", Client)
    monkeypatch.setattr(jobs_cli, "Console", lambda: Console(width=400, color_system=None))
    jobs_cli.jobs_command(server="http://x", token="", json_out=False, state=None, name=None,
                          utc=True)  # fmt: skip
    jobs_cli.job(1, server="http://x", token="", json_out=False, utc=True)
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b[2J" in out and "line 1\n\\x1b[31mline 2" in out
