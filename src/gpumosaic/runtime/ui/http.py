"""``/ui`` routes for the FastAPI services: the page (no data in it, so no token) and
its event stream (``/ui/stream``, the service's own bearer token)."""

from __future__ import annotations

from collections.abc import Callable

import anyio
from anyio import to_thread
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from gpumosaic.runtime.ui.page import page
from gpumosaic.runtime.ui.stream import Feed, bearer_ok, stream

NO_CACHE = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


def ui_routes(
    feed: Feed,
    kind: str,
    title: str,
    token: Callable[[], str],
    script_of: str | None = None,
) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/ui")
    async def ui_page() -> Response:
        return Response(
            page(kind, title, script_of), media_type="text/html; charset=utf-8", headers=NO_CACHE
        )

    @router.get("/ui/stream", response_model=None)
    async def ui_stream(request: Request) -> Response:
        if not bearer_ok(token(), request.headers.get("authorization", "")):
            return JSONResponse(
                {"detail": "missing or wrong token (Authorization: Bearer ...)"}, status_code=401
            )
        raw = request.headers.get("last-event-id") or request.query_params.get("v", "")
        version = feed.client_version(raw)

        async def refresh() -> int:
            return await to_thread.run_sync(feed.refresh)

        events = stream(feed, version, refresh, anyio.sleep, request.is_disconnected)
        headers = {**NO_CACHE, "X-Accel-Buffering": "no"}
        return StreamingResponse(events, media_type="text/event-stream", headers=headers)

    return router
