"""The ``/ui`` pages: one HTML document per service with its CSS and JavaScript inlined
from the package's ``assets/`` (nothing fetched from anywhere: it works offline)."""

from __future__ import annotations

import html
from functools import cache
from importlib import resources

ASSETS = "gpumosaic.runtime.ui.assets"


@cache
def asset(name: str) -> str:
    return resources.files(ASSETS).joinpath(name).read_text(encoding="utf-8")


@cache
def page(kind: str, title: str, script_of: str | None = None) -> bytes:
    """The page of ``kind`` (``rounds``, ``gandiva``, ``extender``, ``share``): the shared
    shell, the shared script and the kind's own body and script (``script_of``: the
    script of another kind, whose world this kind's view also builds)."""
    body = asset(f"{kind}.html")
    script = asset("ui.js") + "\n" + asset(f"{script_of or kind}.js")
    doc = (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{html.escape(title)}</title><link rel='icon' href='data:,'>"
        f"<style>{asset('ui.css')}</style></head>"
        f"<body data-kind='{kind}'>{body}<script>{script}</script></body></html>\n"
    )
    return doc.encode("utf-8")
