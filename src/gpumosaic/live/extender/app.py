"""The extender's HTTP face (FastAPI): filter, prioritize, bind, /healthz, /metrics, /state.

Status rules (docs/kubernetes.md, "What the extender accepts"):

- 200: the answer, with ``Error`` set for logical failures (no room at bind, ...), as the
  extender/v1 protocol wants.
- 400: the body is not JSON or not the extender/v1 struct; 413: larger than the limit
  (refused from Content-Length, or while streaming, before it is buffered); 422: a value
  out of its rules (a quantity, an annotation, a name). Filter answers these in the
  ExtenderFilterResult shape, bind and prioritize as ``{"Error": ...}`` (a HostPriorityList
  has no place for one).
- 401: a token is set and the request does not carry it (every route except /healthz
  and the verbs, which kube-scheduler calls without one).
- 503: the state cannot be written (bind, DELETE /pods); /healthz says so too.
- Never a 500: an unexpected exception is logged with its traceback here and answered as
  a named ``Error`` (200; prioritize answers ``[]``, "no opinion" for kube-scheduler).

Filter and prioritize are pure in-memory work of a millisecond or two: they run on the
event loop, which avoids a thread hop and the GIL hand-over (5 ms switch interval) per
request under concurrency. Bind may wait on the API server or SQLite: it runs in a thread.
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from anyio import to_thread
from fastapi import FastAPI, Request, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from gpumosaic.live.extender.admission import (
    MAX_ARGS_BYTES,
    MAX_NAME_CHARS,
    MAX_SMALL_BODY_BYTES,
    AdmissionError,
    read_body,
)
from gpumosaic.live.extender.backend import StateUnavailable
from gpumosaic.live.extender.metrics import ExtenderMetrics
from gpumosaic.live.extender.openapi import describe_verbs
from gpumosaic.live.extender.service import ExtenderService
from gpumosaic.live.extender.views import state_document
from gpumosaic.live.extender.wire import (
    binding_result,
    encode,
    error_filter_result,
    parse_args,
    parse_binding,
)

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

    def paths(self) -> tuple[str, str, str]:
        return self.path(self.filter), self.path(self.prioritize), self.path(self.bind)


def _json(body: Any, status: int = 200) -> Response:
    return Response(encode(body), status_code=status, media_type="application/json")


class TokenGate:
    """Bearer-token check in front of every route but ``open_paths`` (ASGI middleware, so
    it also covers /docs, /redoc and /openapi.json). The header is compared as bytes:
    a non-ASCII header is a wrong token (401), not an exception."""

    def __init__(self, app: ASGIApp, token: str, open_paths: frozenset[str]) -> None:
        self.app = app
        self.expected = b"Bearer " + token.encode()
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.open_paths:
            await self.app(scope, receive, send)
            return
        given = b""
        for name, value in scope["headers"]:
            if name == b"authorization":
                given = value
                break
        if hmac.compare_digest(given, self.expected):
            await self.app(scope, receive, send)
            return
        body = encode({"Error": "missing or wrong token (Authorization: Bearer ...)"})
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b"Bearer"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def create_app(service: ExtenderService, verbs: Verbs | None = None, token: str = "") -> FastAPI:
    """The app; with ``token``, every route but /healthz and the verbs needs it."""
    verbs = verbs or Verbs()
    metrics = ExtenderMetrics(service)
    app = FastAPI(title="gpumosaic scheduler extender")
    app.state.service = service
    app.state.metrics = metrics

    async def admitted(request: Request, limit: int, parse: Callable[[bytes], Any]) -> Any:
        return parse(await read_body(request.headers, request.stream(), limit))

    async def serve(
        verb: str,
        request: Request,
        parse: Callable[[bytes], Any],
        work: Callable[[Any], Any],
        refused: Callable[[str], Any],
        limit: int,
        threaded: bool,
    ) -> Response:
        start = time.perf_counter()
        try:
            args = await admitted(request, limit, parse)
            result = await to_thread.run_sync(work, args) if threaded else work(args)
        except AdmissionError as err:
            metrics.observe(verb, "bad_request", time.perf_counter() - start)
            return _json(refused(str(err)), err.status)
        except StateUnavailable as err:
            metrics.observe(verb, "unavailable", time.perf_counter() - start)
            return _json(refused(str(err)), 503)
        except Exception as err:  # a bug, not a user error: logged, never a 500
            log.exception("%s failed", verb)
            metrics.observe(verb, "error", time.perf_counter() - start)
            if verb == "prioritize":
                return _json([])
            return _json(refused(f"internal error in {verb}: {type(err).__name__}: {err}"))
        if isinstance(result, bytes):  # already encoded (prioritize)
            metrics.observe(verb, "ok", time.perf_counter() - start)
            return Response(result, media_type="application/json")
        failed = isinstance(result, dict) and bool(result.get("Error"))
        metrics.observe(verb, "error" if failed else "ok", time.perf_counter() - start)
        return _json(result)

    def named(message: str) -> dict[str, str]:
        return {"Error": message}

    filter_path, prioritize_path, bind_path = verbs.paths()

    @app.post(filter_path, openapi_extra=describe_verbs("filter"))
    async def filter_verb(request: Request) -> Response:
        return await serve(
            "filter",
            request,
            parse_args,
            service.filter,
            error_filter_result,
            MAX_ARGS_BYTES,
            threaded=False,
        )

    @app.post(prioritize_path, openapi_extra=describe_verbs("prioritize"))
    async def prioritize_verb(request: Request) -> Response:
        return await serve(
            "prioritize",
            request,
            parse_args,
            service.prioritize_encoded,
            named,
            MAX_ARGS_BYTES,
            threaded=False,
        )

    @app.post(bind_path, openapi_extra=describe_verbs("bind"))
    async def bind_verb(request: Request) -> Response:
        return await serve(
            "bind",
            request,
            parse_binding,
            service.bind,
            binding_result,
            MAX_SMALL_BODY_BYTES,
            threaded=True,
        )

    @app.get("/healthz")
    async def healthz() -> Response:
        """200 while the state can be written; 503 with the reason when it cannot."""
        problem = await to_thread.run_sync(service.backend.health)
        if problem:
            return _json({"status": "unhealthy", "reason": problem}, 503)
        return _json({"status": "ok"})

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
        watch does this in a cluster). 503 when the state cannot be written: the pod then
        stays held, here and after a restart."""
        if not service.backend.releases_by_request:
            return _json({"Error": "the state follows the API server: delete the pod there"}, 409)
        if len(namespace) > MAX_NAME_CHARS or len(name) > MAX_NAME_CHARS:
            return _json({"Error": f"names are at most {MAX_NAME_CHARS} characters"}, 422)
        try:
            freed = await to_thread.run_sync(service.release_by_name, namespace, name)
        except StateUnavailable as err:
            return _json({"Error": str(err)}, 503)
        if not freed:
            return _json({"Error": f"pod {namespace}/{name} holds nothing"}, 404)
        return _json({"Error": ""})

    if token:
        app.add_middleware(
            TokenGate, token=token, open_paths=frozenset({"/healthz", *verbs.paths()})
        )
    return app
