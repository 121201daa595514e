"""The extender's HTTP face (FastAPI): filter, prioritize, bind, /healthz, /metrics, /state.

Every verb answers HTTP 200 unless the body is not the extender/v1 struct (400 with the
message). Logical failures are 200 with ``Error`` set. An unexpected exception is logged
with its traceback here and answered as a named ``Error`` (200; prioritize answers ``[]``,
which kube-scheduler treats as "no opinion"): kube-scheduler never sees a 500.
The work runs in the thread pool, so binds waiting on the API server never block the loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from anyio import to_thread
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from gpumosaic.live.extender.metrics import ExtenderMetrics
from gpumosaic.live.extender.service import ExtenderService
from gpumosaic.live.extender.views import state_document
from gpumosaic.live.extender.wire import (
    WireError,
    binding_result,
    encode,
    error_filter_result,
    parse_args,
    parse_binding,
)
from gpumosaic.live.ui.extender import ui_router

log = logging.getLogger("gpumosaic.extender")


@dataclass(frozen=True, slots=True)
class Verbs:
    """URL paths of the verbs, as ``filterVerb`` etc. of the KubeSchedulerConfiguration
    (kube-scheduler POSTs to ``urlPrefix + "/" + verb``)."""

    prefix: str = ""
    filter: str = "filter"
    prioritize: str = "prioritize"
    bind: str = "bind"

    def path(self, verb: str) -> str:
        base = "/" + self.prefix.strip("/") if self.prefix.strip("/") else ""
        return f"{base}/{verb.strip('/')}"


def _json(body: Any) -> Response:
    return Response(encode(body), media_type="application/json")


def create_app(service: ExtenderService, verbs: Verbs | None = None) -> FastAPI:
    verbs = verbs or Verbs()
    metrics = ExtenderMetrics(service)
    app = FastAPI(title="gpumosaic scheduler extender", docs_url=None, redoc_url=None)
    app.state.service = service
    app.state.metrics = metrics

    async def serve(
        verb: str,
        request: Request,
        parse: Callable[[bytes], Any],
        work: Callable[[Any], Any],
        on_crash: Callable[[str], Any],
    ) -> Response:
        start = time.perf_counter()
        body = await request.body()
        try:
            args = parse(body)
        except WireError as err:
            metrics.observe(verb, "bad_request", time.perf_counter() - start)
            return JSONResponse({"Error": str(err)}, status_code=400)
        try:
            result = await to_thread.run_sync(work, args)
        except Exception as err:  # a bug, not a user error: logged, never a 500
            log.exception("%s failed", verb)
            metrics.observe(verb, "error", time.perf_counter() - start)
            return _json(on_crash(f"internal error in {verb}: {type(err).__name__}: {err}"))
        failed = isinstance(result, dict) and bool(result.get("Error"))
        metrics.observe(verb, "error" if failed else "ok", time.perf_counter() - start)
        return _json(result)

    @app.post(verbs.path(verbs.filter))
    async def filter_verb(request: Request) -> Response:
        return await serve("filter", request, parse_args, service.filter, error_filter_result)

    @app.post(verbs.path(verbs.prioritize))
    async def prioritize_verb(request: Request) -> Response:
        return await serve("prioritize", request, parse_args, service.prioritize, lambda _: [])

    @app.post(verbs.path(verbs.bind))
    async def bind_verb(request: Request) -> Response:
        return await serve("bind", request, parse_binding, service.bind, binding_result)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/metrics")
    async def metrics_endpoint() -> Response:
        data = await to_thread.run_sync(metrics.exposition)
        return Response(data, media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/state")
    async def state() -> Response:
        return _json(await to_thread.run_sync(state_document, service))

    @app.delete("/pods/{namespace}/{name}")
    async def release(namespace: str, name: str) -> Response:
        """Standalone mode only: the pod finished, free its share (the API server's
        watch does this in a cluster)."""
        if not service.backend.releases_by_request:
            return JSONResponse(
                {"Error": "the state follows the API server: delete the pod there"},
                status_code=409,
            )
        freed = await to_thread.run_sync(service.release_by_name, namespace, name)
        if not freed:
            return JSONResponse({"Error": f"pod {namespace}/{name} holds nothing"}, 404)
        return _json({"Error": ""})

    app.include_router(ui_router(service, metrics))  # /ui, /ui/stream (live/ui/extender.py)
    return app
