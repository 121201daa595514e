"""``/docs`` without a CDN, for both services (``serve`` and the Kubernetes extender):
Swagger UI's script and style sheet (Swagger UI 5, which reads FastAPI's OpenAPI 3.1)
come from the ``fastapi-swagger`` package (a dependency of the ``serve`` and ``kube``
extras; only its files are used) and are served by the service itself, and the OpenAPI
schema is written into the page, so the page works on a machine with no network and its
one request to the service is the page itself.

FastAPI's ``get_swagger_ui_html`` and ``get_redoc_html`` load their files from jsDelivr
(and ReDoc's page then fetches ``/openapi.json`` without the token); ``/redoc`` serves
this same page instead."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, params
from fastapi.responses import FileResponse, HTMLResponse

ASSETS_PATH = "/docs/assets"
# The two files the page loads (name -> media type); nothing else is served from the folder.
ASSETS = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
}
BEARER = {"type": "http", "scheme": "bearer", "description": "the service's token"}


def assets_dir() -> Path | None:
    """The folder of Swagger UI's files, or None when ``fastapi-swagger`` is missing."""
    try:
        import fastapi_swagger.resources as resources
    except ImportError:
        return None
    return Path(resources.__file__).parent


def swagger_html(title: str, spec: dict[str, Any]) -> str:
    """The Swagger UI page with ``spec`` inlined (no request for /openapi.json, which
    a browser would send without the token)."""
    # The page's copy of the schema declares the bearer token, so Swagger UI's
    # "Authorize" button takes it and "Try it out" sends it (the page never holds it).
    components = {**spec.get("components", {}), "securitySchemes": {"token": BEARER}}
    spec = {**spec, "components": components, "security": [{"token": []}]}
    # "<" escaped: a "</script>" inside a description cannot end the script early.
    inline = json.dumps(spec).replace("<", "\\u003c")
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{_escape(title)}</title>
<link rel="stylesheet" href="{ASSETS_PATH}/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="{ASSETS_PATH}/swagger-ui-bundle.js"></script>
<script>
SwaggerUIBundle({{spec: {inline}, dom_id: "#swagger-ui", deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis], layout: "BaseLayout"}});
</script></body></html>
"""


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def mount(app: FastAPI, extra: str, dependencies: Sequence[params.Depends] = ()) -> None:
    """``/docs`` and ``/redoc`` (the same offline page) and its two files on ``app``,
    behind ``dependencies`` (a service's token check); ``extra``: the install extra that
    brings ``fastapi-swagger``, named when it is missing."""

    def page() -> HTMLResponse:
        if assets_dir() is None:
            raise HTTPException(
                503, f"/docs needs the fastapi-swagger package (pip install 'gpumosaic[{extra}]')"
            )
        return HTMLResponse(swagger_html(app.title, app.openapi()))

    for path in ("/docs", "/redoc"):
        app.add_api_route(
            path, page, methods=["GET"], dependencies=dependencies, include_in_schema=False
        )

    @app.get(ASSETS_PATH + "/{name}", dependencies=dependencies, include_in_schema=False)
    def docs_asset(name: str) -> FileResponse:
        folder = assets_dir()
        if name not in ASSETS or folder is None:
            raise HTTPException(404, f"no asset {name[:64]}")
        return FileResponse(folder / name, media_type=ASSETS[name])
