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
request under concurrency. Bind and release write (the API server, or SQLite, whose WAL
checkpoints fsync: 18 ms at p99.9 and up to ~90 ms on a shared disk, measured): they run
in a thread, so a slow write never stalls the filters queued behind it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from anyio import to_thread
from fastapi import FastAPI, Response
from fastapi.openapi.utils import get_openapi
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from gpumosaic.apps.extender.admission import (
    MAX_ARGS_BYTES,
    MAX_NAME_CHARS,
    MAX_SMALL_BODY_BYTES,
    AdmissionError,
    read_body,
)
from gpumosaic.apps.extender.backend import StateUnavailable
from gpumosaic.apps.extender.metrics import ExtenderMetrics
from gpumosaic.apps.extender.openapi import describe_verbs
from gpumosaic.apps.extender.service import ExtenderService
from gpumosaic.apps.extender.ui import ui_router
from gpumosaic.apps.extender.views import state_document
from gpumosaic.apps.extender.wire import (
    binding_result,
    encode,
    error_filter_result,
    parse_args,
    parse_binding,
)
from gpumosaic.runtime.api.http_guard import (
    GuardLimits,
    GuardStats,
    HttpGuard,
    Refused,
    header,
)
from gpumosaic.runtime.auth import token_ok
from gpumosaic.runtime.ui import docs_page

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


# The extender's bounds (``http_guard``): kube-scheduler sends one filter at a time per
# profile, so two of the largest bodies in flight at once is room enough; connections are
# as many as serve's.
EXTENDER_LIMITS = GuardLimits(in_flight_bytes=2 * MAX_ARGS_BYTES, drain_bytes=MAX_ARGS_BYTES)


def _error_body(status: int, message: str) -> bytes:
    return encode({"Error": message})


class ClientGone(Exception):
    """The client disconnected before its body arrived: nothing to answer."""


async def _chunks(receive: Receive) -> AsyncIterator[bytes]:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        yield message.get("body", b"")
        if not message.get("more_body", False):
            return


@dataclass(frozen=True, slots=True)
class VerbEndpoint:
    """One verb as a plain ASGI endpoint: body read with its limit, parsed, handed to the
    service, answered by the status rules above. FastAPI's request machinery (dependency
    solving, Request objects) cost ~0.3 ms a request, as much as the work itself, so the
    verbs bypass it; openapi.py describes them in the schema instead."""

    verb: str
    parse: Callable[[bytes], Any]
    work: Callable[[Any], Any]
    refused: Callable[[str], Any]
    limit: Callable[[], int]  # read at each request (the tests lower it)
    threaded: bool
    metrics: ExtenderMetrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = time.perf_counter()
        try:
            status, body, outcome = await self._answer(scope, receive)
        except ClientGone:
            return
        self.metrics.observe(self.verb, outcome, time.perf_counter() - start)
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _answer(self, scope: Scope, receive: Receive) -> tuple[int, bytes, str]:
        declared = next((v for k, v in scope["headers"] if k == b"content-length"), None)
        try:
            raw = await read_body(declared, _chunks(receive), self.limit())
            args = self.parse(raw)
            if self.threaded:
                result = await to_thread.run_sync(self.work, args)
            else:
                result = self.work(args)
        except AdmissionError as err:
            return err.status, encode(self.refused(str(err))), "bad_request"
        except StateUnavailable as err:
            return 503, encode(self.refused(str(err))), "unavailable"
        except (ClientGone, Refused):
            raise  # gone, or refused by the guard around the app (http_guard)
        except Exception as err:  # a bug, not a user error: logged, never a 500
            log.exception("%s failed", self.verb)
            if self.verb == "prioritize":
                return 200, b"[]", "error"
            message = f"internal error in {self.verb}: {type(err).__name__}: {err}"
            return 200, encode(self.refused(message)), "error"
        if isinstance(result, bytes):  # already encoded (prioritize)
            return 200, result, "ok"
        failed = isinstance(result, dict) and bool(result.get("Error"))
        return 200, encode(result), "error" if failed else "ok"


def _named(message: str) -> dict[str, str]:
    return {"Error": message}


def create_app(service: ExtenderService, verbs: Verbs | None = None, token: str = "") -> FastAPI:
    """The app; with ``token``, every route but /healthz and the verbs needs it."""
    verbs = verbs or Verbs()
    metrics = ExtenderMetrics(service)
    # /docs and /redoc: one offline page, served by the extender (FastAPI's own load
    # their files from a CDN); the token gate covers them like every route.
    app = FastAPI(title="gpumosaic scheduler extender", docs_url=None, redoc_url=None)
    docs_page.mount(app, "kube")
    app.state.service = service
    app.state.metrics = metrics
    endpoints = {
        "filter": VerbEndpoint(
            "filter", parse_args, service.filter, error_filter_result,
            lambda: MAX_ARGS_BYTES, False, metrics,
        ),
        "prioritize": VerbEndpoint(
            "prioritize", parse_args, service.prioritize_encoded, _named,
            lambda: MAX_ARGS_BYTES, False, metrics,
        ),
        "bind": VerbEndpoint(
            "bind", parse_binding, service.bind, binding_result,
            lambda: MAX_SMALL_BODY_BYTES, True, metrics,
        ),
    }  # fmt: skip
    paths = dict(zip(endpoints, verbs.paths(), strict=True))
    for verb, endpoint in endpoints.items():
        app.router.routes.append(Route(paths[verb], endpoint, methods=["POST"]))

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
            for verb, path in paths.items():
                schema["paths"][path] = {
                    "post": {"summary": verb, "operationId": verb, **describe_verbs(verb)}
                }
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

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

    # /ui, /ui/stream (apps/extender/ui.py): the page holds no data and is open; its stream
    # asks for the token like /state and /metrics.
    app.include_router(ui_router(service, metrics, token or ""))
    # Every route but /healthz, /ui and the verbs (kube-scheduler calls them without one)
    # needs the token, decided from the headers before a byte of a body is read; bodies
    # are bounded per request and in total (``http_guard``).
    open_paths = frozenset({"/healthz", "/ui", *verbs.paths()})
    app.state.guard = GuardStats()
    app.add_middleware(
        HttpGuard,
        limit_of=lambda path: MAX_ARGS_BYTES if path in verbs.paths() else MAX_SMALL_BODY_BYTES,
        authorized=lambda scope: (
            scope["path"] in open_paths or token_ok(token, header(scope, b"authorization"))
        ),
        limits=EXTENDER_LIMITS,
        body_of=_error_body,
        stats=app.state.guard,
    )
    return app
