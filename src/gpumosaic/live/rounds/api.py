"""The HTTP API of the round service (FastAPI; the OpenAPI schema is at ``/openapi.json``).

Users: ``POST /v1/jobs``, ``GET /v1/jobs``, ``GET /v1/jobs/{id}``, ``GET /v1/jobs/{id}/logs``,
``POST /v1/jobs/{id}/cancel``. Jobs (``gpumosaic.lease``): ``POST /v1/leases/{id}/init``,
``/progress`` (steps; ``at_end`` waits for the round decision), ``/checkpoint``, and
``GET /v1/leases/{id}`` (410 once the lease is over: the caller is fenced).
Operators: ``/healthz`` and Prometheus text at ``/metrics``.

With a token (required off loopback), every route but ``/healthz`` wants
``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import asyncio
import hmac
import resource
from collections.abc import Callable
from typing import Any, Protocol

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel, Field

from gpumosaic.live.rounds.leases import Grant, LeaseTable
from gpumosaic.live.rounds.ray_executor import log_tail
from gpumosaic.live.rounds.records import JobRow
from gpumosaic.live.rounds.store import Store
from gpumosaic.live.rounds.submission import JOB_STATES, JobSubmission, JobView
from gpumosaic.live.ui.rounds import ui_router


class ServiceView(Protocol):
    """What the API needs from the running service."""

    store: Store
    table: LeaseTable
    token: str
    park_margin_s: float
    default_retries: int
    driver_error: BaseException | None

    def check_fits(self, sub: JobSubmission) -> tuple[str, str] | None: ...

    def live_steps(self, job: JobRow) -> float: ...

    def log_path(self, job_id: int) -> str: ...

    def metrics(self) -> dict[str, float]: ...

    def clock(self) -> float: ...


class LeaseInit(BaseModel):
    steps: float = Field(ge=0)
    rank: int = Field(default=0, ge=0)
    pid: int = Field(default=0, ge=0)


class LeaseProgress(BaseModel):
    steps: float = Field(ge=0)
    elapsed_s: float = 0.0
    at_end: bool = False
    rank: int = Field(default=0, ge=0)
    pid: int = Field(default=0, ge=0)


class LeaseCheckpoint(BaseModel):
    steps: float = Field(ge=0)
    rank: int = Field(default=0, ge=0)
    pid: int = Field(default=0, ge=0)


def _unprocessable(field: str, message: str) -> JSONResponse:
    """The same shape as FastAPI's own validation errors, so clients read one format."""
    detail = [{"loc": ["body", field], "msg": message, "type": "value_error"}]
    return JSONResponse(status_code=422, content={"detail": detail})


def _gone(lease_id: str) -> HTTPException:
    return HTTPException(410, f"lease {lease_id} is over (a newer lease owns the job)")


def job_view(job: JobRow, steps_done: float, rate: float | None, tail: str = "") -> JobView:
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
        gpu_type=job.gpu_type,
        gpu_index=job.gpu_index,
        attained_s=job.attained_s,
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
    )


def create_app(service: ServiceView) -> FastAPI:
    app = FastAPI(
        title="gpumosaic round service",
        description="Gavel's round-based scheduler executing jobs on Ray (docs/live.md).",
        version="1",
    )
    store, table = service.store, service.table

    def authorized(request: Request) -> None:
        if not service.token:
            return
        given = request.headers.get("authorization", "")
        if not hmac.compare_digest(given, f"Bearer {service.token}"):
            raise HTTPException(401, "missing or wrong token (Authorization: Bearer ...)")

    auth = [Depends(authorized)]

    def view(job: JobRow, tail: str = "") -> JobView:
        rate = store.throughputs(job.id).get(job.gpu_type) if job.gpu_type else None
        return job_view(job, service.live_steps(job), rate, tail)

    def find(job_id: int) -> JobRow:
        job = store.job(job_id)
        if job is None:
            raise HTTPException(404, f"no job {job_id}")
        return job

    @app.get("/healthz", response_model=None)
    def healthz() -> dict[str, Any] | JSONResponse:
        err = service.driver_error
        if err is not None:  # the round loop died: say so instead of looking healthy
            body = {"ok": False, "error": f"{type(err).__name__}: {err}"}
            return JSONResponse(status_code=503, content=body)
        return {"ok": True}

    @app.get("/metrics", dependencies=auth, response_class=PlainTextResponse)
    def metrics() -> str:
        counts = dict.fromkeys(JOB_STATES, 0)
        for job in store.jobs():
            counts[job.state] = counts.get(job.state, 0) + 1
        lines = ["# TYPE gpumosaic_jobs gauge"]
        lines += [f'gpumosaic_jobs{{state="{s}"}} {n}' for s, n in counts.items()]
        for name, value in service.metrics().items():
            kind = "counter" if name.endswith("_total") else "gauge"
            lines += [f"# TYPE gpumosaic_{name} {kind}", f"gpumosaic_{name} {value:g}"]
        rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        lines += [
            "# TYPE gpumosaic_service_max_rss_bytes gauge",
            f"gpumosaic_service_max_rss_bytes {rss_kib * 1024}",
        ]
        return "\n".join(lines) + "\n"

    @app.post("/v1/jobs", dependencies=auth, status_code=201, response_model=None)
    def submit(sub: JobSubmission) -> dict[str, int] | JSONResponse:
        problem = service.check_fits(sub)
        if problem is not None:
            return _unprocessable(*problem)
        job_id = store.add_job(sub, service.clock(), default_retries=service.default_retries)
        return {"id": job_id}

    @app.get("/v1/jobs", dependencies=auth)
    def jobs() -> list[JobView]:
        return [view(j) for j in store.jobs()]

    @app.get("/v1/jobs/{job_id}", dependencies=auth)
    def job(job_id: int) -> JobView:
        row = find(job_id)
        tail = row.log_tail or log_tail(service.log_path(job_id), 2000)
        return view(row, tail)

    @app.get("/v1/jobs/{job_id}/logs", dependencies=auth, response_class=PlainTextResponse)
    def logs(job_id: int, tail: int = 20000) -> str:
        find(job_id)
        return log_tail(service.log_path(job_id), max(tail, 0))

    @app.post("/v1/jobs/{job_id}/cancel", dependencies=auth)
    def cancel(job_id: int) -> dict[str, Any]:
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

    @app.get("/v1/leases/{lease_id}", dependencies=auth)
    def lease(lease_id: str) -> dict[str, object]:
        return grant_json(table.current(lease_id), lease_id)

    @app.post("/v1/leases/{lease_id}/init", dependencies=auth)
    def init(lease_id: str, body: LeaseInit) -> dict[str, object]:
        return grant_json(table.init(lease_id, body.rank, body.pid), lease_id)

    @app.post("/v1/leases/{lease_id}/progress", dependencies=auth)
    async def progress(lease_id: str, body: LeaseProgress) -> dict[str, object]:
        grant = table.report(lease_id, body.rank, body.steps, body.elapsed_s, body.at_end)
        if grant is None:
            raise _gone(lease_id)
        if body.at_end and not grant.stop:
            grant = await _await_decision(
                table, lease_id, grant, service.clock, service.park_margin_s
            )
        return grant_json(grant, lease_id)

    @app.post("/v1/leases/{lease_id}/checkpoint", dependencies=auth)
    def checkpoint(lease_id: str, body: LeaseCheckpoint) -> dict[str, object]:
        if not table.checkpoint(lease_id, body.rank, body.steps):
            raise _gone(lease_id)
        return {"ok": True, "steps": body.steps}

    app.include_router(ui_router(service))  # /ui, /ui/stream (live/ui/rounds.py)
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
