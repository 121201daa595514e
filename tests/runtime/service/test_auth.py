"""Authentication and authority (issue 23, item 6): the service token opens every route,
the docs included; a job's token opens only its own leases; a malformed or non-ASCII
header is 401, never 500."""

from __future__ import annotations

import http.client
from urllib.parse import urlsplit

from rounds_support import wait_for

from gpumosaic.runtime.api.client import ServiceClient
from gpumosaic.runtime.auth import job_token

TOKEN = "s3cret-token"


def status(url: str, method: str, path: str, auth: bytes | str | None, body: bytes = b"") -> int:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    conn.putrequest(method, path)
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(len(body)))
    if auth is not None:
        conn.putheader("Authorization", auth)
    conn.endheaders(body)
    code = conn.getresponse().status
    conn.close()
    return code


def test_docs_and_routes_need_the_token(api_factory) -> None:  # type: ignore[no-untyped-def]
    svc = api_factory(token=TOKEN)
    for path in ("/docs", "/redoc", "/openapi.json", "/metrics", "/v1/jobs"):
        assert status(svc.url, "GET", path, None) == 401, path
        assert status(svc.url, "GET", path, f"Bearer {TOKEN}") == 200, path
    assert status(svc.url, "GET", "/healthz", None) == 200


def test_malformed_headers_are_401(api_factory) -> None:  # type: ignore[no-untyped-def]
    svc = api_factory(token=TOKEN)
    for header in (
        "Bearer s3cret-tökén".encode("latin-1"),
        "Bearer ☃".encode(),
        b"Bearer \xff\xfe",
        b"Basic dXNlcjpwYXNz",
        b"Bearer",
        b"",
        f"Bearer {TOKEN}x".encode(),
    ):
        assert status(svc.url, "GET", "/v1/jobs", header) == 401, header
        assert status(svc.url, "GET", "/v1/leases/1-0-abc", header) == 401, header


def test_a_job_token_opens_its_own_leases_only(api_factory) -> None:  # type: ignore[no-untyped-def]
    svc = api_factory(token=TOKEN, round_s=600.0)
    client = ServiceClient(svc.url, TOKEN)
    # One batch: both are admitted at the same round boundary (one by one, the second
    # could miss the first round and wait the whole 600 s round).
    first, second = client.submit_batch([{"command": "train", "steps": 1e9}] * 2)

    def leases() -> dict[int, str]:
        return {j["id"]: j["lease_id"] for j in client.jobs() if j["lease_id"]}

    wait_for(lambda: len(leases()) == 2, 90, "both jobs to hold a lease")
    lease_of = leases()
    mine = f"Bearer {job_token(TOKEN, first)}"
    assert status(svc.url, "GET", f"/v1/leases/{lease_of[first]}", mine) == 200
    assert status(svc.url, "GET", f"/v1/leases/{lease_of[second]}", mine) == 401
    body = b'{"steps": 1}'
    assert status(svc.url, "POST", f"/v1/leases/{lease_of[second]}/checkpoint", mine, body) == 401
    # Its token is no user token: it cannot list, submit or cancel, its own job included.
    assert status(svc.url, "GET", "/v1/jobs", mine) == 401
    assert status(svc.url, "POST", f"/v1/jobs/{second}/cancel", mine) == 401
    assert status(svc.url, "POST", f"/v1/jobs/{first}/cancel", mine) == 401
    assert status(svc.url, "POST", "/v1/jobs", mine, b'{"command": "x", "steps": 1}') == 401
    # A lease that ended answers its own job 410 (fenced), anyone else 401.
    svc.table.end(lease_of[first])
    assert status(svc.url, "GET", f"/v1/leases/{lease_of[first]}", mine) == 410
    other = f"Bearer {job_token(TOKEN, second)}"
    assert status(svc.url, "GET", f"/v1/leases/{lease_of[first]}", other) == 401


def test_jobs_get_their_own_token_never_the_services(api_factory) -> None:  # type: ignore[no-untyped-def]
    svc = api_factory(token=TOKEN, round_s=600.0)
    launched = []
    real_launch = svc.executor.launch
    svc.executor.launch = lambda spec: (launched.append(spec), real_launch(spec))[1]
    job_id = ServiceClient(svc.url, TOKEN).submit({"command": "train", "steps": 1e9})
    wait_for(lambda: bool(launched), 90, "a launch")
    env = dict(launched[0].env)
    assert env["GPUMOSAIC_TOKEN"] == job_token(TOKEN, job_id)
    assert TOKEN not in "".join(env.values())
