"""The HTTP API of the round service (FastAPI; the OpenAPI schema is at ``/openapi.json``).

Users: ``POST /v1/jobs``, ``POST /v1/jobs/batch`` (all or nothing), ``GET /v1/jobs``
(paginated: ``limit``, ``after``; filters ``state``, ``name``), ``GET /v1/jobs/{id}``,
``GET /v1/jobs/{id}/logs`` (a bounded tail, or from an ``offset``; streamed),
``POST /v1/jobs/{id}/cancel``, ``GET /v1/summary`` (the run so far, the keys of
``simulate --json``, by the simulations' own summary).
Jobs (``gpumosaic.lease``): ``POST /v1/leases/{id}/init``, ``/progress`` (steps;
``at_end`` waits for the round decision), ``/checkpoint``, and ``GET /v1/leases/{id}``
(410 once the lease is over: the caller is fenced). Operators: ``/healthz`` and
Prometheus text at ``/metrics``.

Every input is checked by ``admission``'s limits (422 naming the field, 413 for a body
over its limit, before it is read); no input gives a 5xx. With a token (required off
loopback), every route but ``/healthz`` wants ``Authorization: Bearer <token>``, the
docs (``/docs``, ``/redoc``, ``/openapi.json``) included; a job's own token opens only
its own leases (``auth``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import sqlite3
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import (
    JSONResponse,
    PlainTextResponse,
    StreamingResponse,
)

from gpumosaic.runtime.api.http_guard import GuardLimits, GuardStats, HttpGuard, Scope, header
from gpumosaic.runtime.auth import Authority, lease_job
from gpumosaic.runtime.executors.ray import log_tail
from gpumosaic.runtime.jobs.admission import (
    DEFAULT_LOG_TAIL_BYTES,
    DEFAULT_PAGE,
    MAX_BATCH_BODY_BYTES,
    MAX_BODY_BYTES,
    MAX_ID,
    MAX_LEASE_ID_CHARS,
    MAX_LOG_TAIL_BYTES,
    MAX_NAME_CHARS,
    MAX_PAGE,
    LeaseCheckpoint,
    LeaseInit,
    LeaseProgress,
    no_nul,
)
from gpumosaic.runtime.jobs.submission import (
    JOB_STATES,
    JobBatch,
    JobSubmission,
    JobView,
)
from gpumosaic.runtime.leases import Grant, LeaseTable
from gpumosaic.runtime.share.supervisor import ShareView
from gpumosaic.runtime.state.live_result import store_summary
from gpumosaic.runtime.state.records import GandivaJobRow, JobRow
from gpumosaic.runtime.state.store import Store
from gpumosaic.runtime.ui import docs_page

log = logging.getLogger(__name__)
BATCH_PATH = "/v1/jobs/batch"
LOG_CHUNK_BYTES = 64 * 1024

JobId = Annotated[int, Path(ge=1, le=MAX_ID, description="a job id")]
LeaseId = Annotated[str, Path(min_length=1, max_length=MAX_LEASE_ID_CHARS)]


class ServiceView(Protocol):
    """What the API needs from the running service."""

    store: Store
    table: LeaseTable
    authority: Authority
    guard_limits: GuardLimits
    park_margin_s: float
    default_retries: int
    total_gpu_milli: int  # the cluster's, for the summary's utilization

    def health_problem(self) -> str | None: ...

    def check_fits(self, sub: JobSubmission) -> tuple[str, str] | None: ...

    def live_steps(self, job: JobRow) -> float: ...

    def live_attained_s(self, job: JobRow) -> float: ...

    def packed_with(self, job_id: int) -> int | None: ...

    def log_path(self, job_id: int) -> str: ...

    def metrics(self) -> dict[str, float]: ...

    @property
    def gandiva(self) -> bool:
        """``--mechanism gandiva``: jobs show suspensions, migrations, packed_with."""
        ...

    def clock(self) -> float: ...

    def share_view(self, job: JobRow) -> ShareView | None: ...


def _unprocessable(loc: list[str | int], message: str) -> JSONResponse:
    """The same shape as FastAPI's own validation errors, so clients read one format."""
    detail = [{"loc": ["body", *loc], "msg": message, "type": "value_error"}]
    return JSONResponse(status_code=422, content={"detail": detail})


def _gone(lease_id: str) -> HTTPException:
    return HTTPException(410, f"lease {lease_id} is over (a newer lease owns the job)")


def job_view(
    job: JobRow,
    steps_done: float,
    rate: float | None,
    tail: str = "",
    gandiva: GandivaJobRow | None = None,
    attained_s: float | None = None,
    known_rates: dict[str, float] | None = None,
) -> JobView:
    return JobView(
        id=job.id,
        name=job.name,
        state=job.state,
        command=job.command,
        steps=job.steps,
        steps_done=steps_done,
        checkpoint_steps=job.checkpoint_steps,
        gpus=job.num_gpu,
        gpu_milli=job.gpu_milli,
        gpu_models=list(job.gpu_models),
        priority_weight=job.priority_weight,
        rates=known_rates or {},
        gpu_type=job.gpu_type,
        gpu_index=job.gpu_index,
        attained_s=job.attained_s if attained_s is None else attained_s,
        steps_per_s=rate,
        attempts=job.attempts,
        exit_code=job.exit_code,
        reason=job.reason,
        submitted_at=job.submitted_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        lease_id=job.lease_id,
        pid=job.pid,
        log_tail=tail,
        suspensions=None if gandiva is None else gandiva.suspensions,
        migrations=None if gandiva is None else gandiva.migrations,
        packed_with=None if gandiva is None else gandiva.packed_with,
    )


def body_limit_of(path: str) -> int:
    return MAX_BATCH_BODY_BYTES if path.rstrip("/") == BATCH_PATH else MAX_BODY_BYTES


def may_send_body(authority: Authority, scope: Scope) -> bool:
    """Whether a request's headers may open its route far enough to have its body read
    (``HttpGuard``): a request without a body, the service token, or on a lease route the
    token of the lease's job. The route's own check still decides."""
    if scope.get("method") in ("GET", "HEAD", "OPTIONS") or authority.open:
        return True
    given = header(scope, b"authorization")
    parts = str(scope.get("path", "")).split("/")
    if len(parts) > 3 and parts[1:3] == ["v1", "leases"]:
        return authority.may_use_lease(given, lease_job(parts[3]))
    return authority.is_user(given)


def stream_range(path: str, start: int, end: int) -> Iterator[bytes]:
    """Bytes ``start`` to ``end`` of a file, in chunks (never all in memory)."""
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed by the generator
    except OSError:
        return
    with f:
        f.seek(start)
        left = end - start
        while left > 0:
            chunk = f.read(min(LOG_CHUNK_BYTES, left))
            if not chunk:
                return
            left -= len(chunk)
            yield chunk


def create_app(service: ServiceView, ui: Callable[[Any], APIRouter] | None = None) -> FastAPI:
    app = FastAPI(
        title="gpumosaic round service",
        description="Gavel's round-based scheduler executing jobs on Ray (docs/live.md).",
        version="1",
        docs_url=None,  # served below, behind the token
        redoc_url=None,
        openapi_url=None,
    )
    store, table, authority = service.store, service.table, service.authority
    app.state.guard = GuardStats()
    app.add_middleware(
        HttpGuard,
        limit_of=body_limit_of,
        authorized=lambda scope: may_send_body(authority, scope),
        limits=service.guard_limits,
        stats=app.state.guard,
    )

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's own handler echoes the input, which may be NaN (not JSON) or huge.
        detail = [
            {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": str(e["type"])}
            for e in exc.errors()[:20]
        ]
        return JSONResponse(status_code=422, content={"detail": detail})

    @app.exception_handler(sqlite3.Error)
    async def state_error(request: Request, exc: sqlite3.Error) -> JSONResponse:
        log.error("state write failed: %s", exc)
        return JSONResponse(
            status_code=503, content={"detail": f"the service's state cannot be written: {exc}"}
        )

    def user(request: Request) -> None:
        if not authority.is_user(request.headers.get("authorization")):
            raise HTTPException(
                401,
                "missing or wrong token (Authorization: Bearer <the service's token>)",
                headers={"WWW-Authenticate": "Bearer"},
            )

    def lease_holder(request: Request, lease_id: LeaseId) -> None:
        lease = table.get(lease_id)
        job_id = lease.job_id if lease is not None else lease_job(lease_id)
        if not authority.may_use_lease(request.headers.get("authorization"), job_id):
            raise HTTPException(
                401,
                "missing or wrong token for this lease (the job's GPUMOSAIC_TOKEN)",
                headers={"WWW-Authenticate": "Bearer"},
            )

    users = [Depends(user)]
    holders = [Depends(lease_holder)]

    def view(job: JobRow, tail: str = "") -> JobView:
        rate = store.throughputs(job.id).get(job.gpu_type) if job.gpu_type else None
        # Gandiva: a job never suspended, moved or packed has no row yet (all zero).
        gandiva = (store.gandiva_job(job.id) or GandivaJobRow(job.id)) if service.gandiva else None
        attained = service.live_attained_s(job)
        known = store.known_rates(job.id)
        shown = job_view(job, service.live_steps(job), rate, tail, gandiva, attained, known)
        if gandiva is None:  # rounds: a packed pair's partner while both run
            shown = shown.model_copy(update={"packed_with": service.packed_with(job.id)})
        share = service.share_view(job)  # --sharing: shared, hand-overs (sharing.py)
        if share is None:
            return shown
        return shown.model_copy(
            update={
                "shared": share.shared,
                "handovers": share.handovers,
                "lock_grants": share.grants,
            }
        )

    def find(job_id: int) -> JobRow:
        job = store.job(job_id)
        if job is None:
            raise HTTPException(404, f"no job {job_id}")
        return job

    # ---- operators -----------------------------------------------------------------

    @app.get("/healthz", response_model=None)
    def healthz() -> dict[str, Any] | JSONResponse:
        problem = service.health_problem()
        if problem is not None:  # the round loop died or the state is unwritable
            return JSONResponse(status_code=503, content={"ok": False, "error": problem})
        return {"ok": True}

    @app.get("/metrics", dependencies=users, response_class=PlainTextResponse)
    def metrics() -> str:
        counts = dict.fromkeys(JOB_STATES, 0)
        counts.update(store.counts_by_state())
        lines = ["# TYPE gpumosaic_jobs gauge"]
        lines += [f'gpumosaic_jobs{{state="{s}"}} {n}' for s, n in counts.items()]
        for name, value in service.metrics().items():
            kind = "counter" if name.endswith("_total") else "gauge"
            lines += [f"# TYPE gpumosaic_{name} {kind}", f"gpumosaic_{name} {value:g}"]
        guard: GuardStats = app.state.guard
        for name, value in (
            ("http_in_flight_bytes", guard.in_flight_bytes),
            ("http_refused_unauthenticated_total", guard.refused_unauthenticated),
            ("http_refused_too_large_total", guard.refused_too_large),
            ("http_refused_busy_total", guard.refused_busy),
        ):
            kind = "counter" if name.endswith("_total") else "gauge"
            lines += [f"# TYPE gpumosaic_{name} {kind}", f"gpumosaic_{name} {value}"]
        rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        lines += [
            "# TYPE gpumosaic_service_max_rss_bytes gauge",
            f"gpumosaic_service_max_rss_bytes {rss_kib * 1024}",
        ]
        return "\n".join(lines) + "\n"

    @app.get("/openapi.json", dependencies=users, include_in_schema=False)
    def openapi() -> dict[str, Any]:
        return app.openapi()

    docs_page.mount(app, "serve", users)  # /docs and /redoc: one offline page (no CDN)

    # ---- users ---------------------------------------------------------------------

    @app.post("/v1/jobs", dependencies=users, status_code=201, response_model=None)
    def submit(sub: JobSubmission) -> dict[str, int] | JSONResponse:
        problem = service.check_fits(sub)
        if problem is not None:
            return _unprocessable([problem[0]], problem[1])
        job_id = store.add_job(sub, service.clock(), default_retries=service.default_retries)
        return {"id": job_id}

    @app.post(BATCH_PATH, dependencies=users, status_code=201, response_model=None)
    def submit_batch(batch: JobBatch) -> dict[str, list[int]] | JSONResponse:
        """Every job is checked first; then all are admitted in one transaction, or none."""
        for i, sub in enumerate(batch.jobs):
            problem = service.check_fits(sub)
            if problem is not None:
                return _unprocessable(["jobs", i, problem[0]], problem[1])
        ids = store.add_jobs(batch.jobs, service.clock(), service.default_retries)
        return {"ids": ids}

    @app.get("/v1/jobs", dependencies=users)
    def jobs(
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
        after: Annotated[int, Query(ge=0, le=MAX_ID, description="ids above this")] = 0,
        state: Annotated[str | None, Query(max_length=16)] = None,
        name: Annotated[str | None, Query(max_length=MAX_NAME_CHARS)] = None,
    ) -> JSONResponse:
        if state is not None and state not in JOB_STATES:
            raise HTTPException(422, f"state must be one of {', '.join(JOB_STATES)}")
        if name is not None:
            try:  # names are stored as submission admitted them: no NUL, stripped
                name = no_nul(name, "name").strip()
            except ValueError as err:
                return JSONResponse(
                    status_code=422,
                    content={
                        "detail": [
                            {"loc": ["query", "name"], "msg": str(err), "type": "value_error"}
                        ]
                    },
                )
        rows = store.jobs_page(after, limit, state, name)
        headers = {"X-Next-After": str(rows[-1].id)} if len(rows) == limit else {}
        body = [view(j).model_dump() for j in rows]
        return JSONResponse(content=body, headers=headers)

    @app.get("/v1/summary", dependencies=users)
    def summary() -> dict[str, Any]:
        return store_summary(store, service.total_gpu_milli, service.clock()).to_json()

    @app.get("/v1/jobs/{job_id}", dependencies=users)
    def job(job_id: JobId) -> JobView:
        row = find(job_id)
        tail = row.log_tail or log_tail(service.log_path(job_id), 2000)
        return view(row, tail)

    @app.get("/v1/jobs/{job_id}/logs", dependencies=users, response_class=PlainTextResponse)
    def logs(
        job_id: JobId,
        tail: Annotated[
            int, Query(ge=0, le=MAX_LOG_TAIL_BYTES, description="bytes from the end")
        ] = DEFAULT_LOG_TAIL_BYTES,
        offset: Annotated[
            int | None,
            Query(ge=0, le=MAX_ID, description="bytes from this offset on (for --follow)"),
        ] = None,
    ) -> StreamingResponse:
        find(job_id)
        path = service.log_path(job_id)
        try:
            size = os.stat(path).st_size
        except OSError:
            size = 0
        # The log only grows: the bytes [start, end) exist now and are what is sent;
        # X-Log-End is where the next read (``offset``) starts.
        start = max(0, size - tail) if offset is None else min(offset, size)
        end = min(size, start + (tail if offset is None else MAX_LOG_TAIL_BYTES))
        return StreamingResponse(
            stream_range(path, start, end),
            media_type="text/plain; charset=utf-8",
            headers={"X-Log-End": str(end)},
        )

    @app.post("/v1/jobs/{job_id}/cancel", dependencies=users)
    def cancel(job_id: JobId) -> dict[str, Any]:
        row = find(job_id)
        if row.terminal:
            raise HTTPException(409, f"job {job_id} is already {row.state}")
        store.request_cancel(job_id, service.clock())
        return {"id": job_id, "state": "cancelling"}

    # ---- the lease protocol ----------------------------------------------------------

    def grant_json(grant: Grant | None, lease_id: str) -> dict[str, object]:
        if grant is None:
            raise _gone(lease_id)
        return grant.to_json()

    @app.get("/v1/leases/{lease_id}", dependencies=holders)
    def lease(lease_id: LeaseId) -> dict[str, object]:
        return grant_json(table.current(lease_id), lease_id)

    @app.post("/v1/leases/{lease_id}/init", dependencies=holders)
    def init(lease_id: LeaseId, body: LeaseInit) -> dict[str, object]:
        return grant_json(table.init(lease_id, body.rank, body.pid), lease_id)

    @app.post("/v1/leases/{lease_id}/progress", dependencies=holders)
    async def progress(lease_id: LeaseId, body: LeaseProgress) -> dict[str, object]:
        grant = table.report(lease_id, body.rank, body.steps, body.elapsed_s, body.at_end)
        if grant is None:
            raise _gone(lease_id)
        if body.at_end and not grant.stop:
            grant = await _await_decision(
                table, lease_id, grant, service.clock, service.park_margin_s
            )
        return grant_json(grant, lease_id)

    @app.post("/v1/leases/{lease_id}/checkpoint", dependencies=holders)
    def checkpoint(lease_id: LeaseId, body: LeaseCheckpoint) -> dict[str, object]:
        if not table.checkpoint(lease_id, body.rank, body.steps):
            raise _gone(lease_id)
        return {"ok": True, "steps": body.steps}

    if ui is not None:  # /ui, /ui/stream: the mechanism's view (mechanisms/<m>/ui.py)
        app.include_router(ui(service))
    return app


async def _await_decision(
    table: LeaseTable, lease_id: str, grant: Grant, clock: Callable[[], float], margin_s: float
) -> Grant | None:
    """A parked job waits for the round decision about its lease: extension or stop. If
    none comes by the lease's end plus ``margin_s`` (the driver is gone), the job stops."""
    lease = table.get(lease_id)
    if lease is None:
        return None
    give_up = max(clock(), lease.deadline) + margin_s
    while clock() < give_up:
        decision = table.decision_of(lease_id)
        if decision is None:
            return None
        if decision != grant.decision:
            return table.current(lease_id)
        await asyncio.sleep(0.01)
    return Grant(lease_id, grant.until_step, 0.0, grant.total_steps, True, grant.decision)
