"""Admission (issue 23, item 1): every number finite and in range, every string, list and
body bounded, lists paginated, log tails bounded and streamed; no input is a 5xx. The
service runs with the in-process executor (no Ray); requests go over real HTTP."""

from __future__ import annotations

import http.client
import json
import math
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from gpumosaic.errors import InputError
from gpumosaic.runtime.api.client import ServiceClient
from gpumosaic.runtime.jobs.admission import (
    MAX_BODY_BYTES,
    MAX_LOG_TAIL_BYTES,
    MAX_PAGE,
)
from gpumosaic.runtime.jobs.submission import check_job


def raw(url: str, method: str, path: str, body: bytes | None = None, **headers: str):  # type: ignore[no-untyped-def]
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    conn.request(method, path, body=body, headers={"Content-Type": "application/json", **headers})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, data, dict(resp.getheaders())


def post_job(url: str, body: dict[str, object] | str) -> tuple[int, bytes]:
    text = body if isinstance(body, str) else json.dumps(body)
    status, data, _ = raw(url, "POST", "/v1/jobs", text.encode())
    return status, data


GOOD = {"command": "train", "steps": 10}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ('{"command": "x", "steps": NaN}', "steps"),
        ('{"command": "x", "steps": Infinity}', "steps"),
        ('{"command": "x", "steps": 1e400}', "steps"),
        ('{"command": "x", "steps": -1}', "steps"),
        ('{"command": "x", "steps": 1e13}', "steps"),
        ('{"command": "x", "steps": 5, "priority_weight": 1e-300}', "priority_weight"),
        ('{"command": "x", "steps": 5, "priority_weight": NaN}', "priority_weight"),
        ('{"command": "x", "steps": 5, "gpus": 99999999999999999999999}', "gpus"),
        ('{"command": "x", "steps": 5, "gpu_milli": 1001}', "gpu_milli"),
        ('{"command": "x", "steps": 5, "max_retries": 1e3}', "max_retries"),
        ('{"command": "a\\u0000b", "steps": 5}', "command"),
        ('{"command": "x", "steps": 5, "env": {"A=B": "1"}}', "env"),
        ('{"command": "x", "steps": 5, "env": {"A": "\\u0000"}}', "env"),
        ('{"command": "x", "steps": 5, "gpu_models": ["Z999"]}', "gpu_models"),
        ('{"command": "x", "steps": 5, "rates": {"V100": NaN}}', "rates"),
        ('{"command": "x", "steps": 5, "rates": {"V100": Infinity}}', "rates"),
        ('{"command": "x", "steps": 5, "rates": {"V100": 0}}', "rates"),
        ('{"command": "x", "steps": 5, "rates": {"V100": -1.5}}', "rates"),
        ('{"command": "x", "steps": 5, "rates": {"V100": 1e7}}', "rates"),
        ('{"command": "x", "steps": 5, "rates": {"V100": "fast"}}', "rates"),
        ('{"command": "x", "steps": 5, "rates": {"Z999": 1}}', "rates"),
        ('{"command": "x", "steps": 5, "rates": {"v100": 1, "V100": 2}}', "rates"),
        ('{"command": "x", "steps": 5, "rates": [1, 2]}', "rates"),
        (
            '{"command": "x", "steps": 5, "gpu_models": ["V100"], "rates": {"K80": 1}}',
            "rates",
        ),
        (  # more names than MAX_GPU_MODELS
            '{"command": "x", "steps": 5, "rates": {'
            + ", ".join(f'"m{i}": 1' for i in range(17))
            + "}}",
            "rates",
        ),
        ('{"command": "x", "steps": 5, "name": "' + "n" * 200 + '"}', "name"),
        ('{"command": "' + "c" * 20_000 + '", "steps": 5}', "command"),
        ('{"command": "x", "steps": 5, "plicy": 1}', "plicy"),
        ('{"command": "x", "steps": 5, "gpus": 64}', "gpus"),  # more than the cluster has
        ("[1, 2]", ""),
        ("not json", ""),
    ],
)
def test_bad_submissions_are_422_naming_the_field(api_factory, change: str, field: str) -> None:  # type: ignore[no-untyped-def]
    svc = api_factory()
    status, data = post_job(svc.url, change)
    assert status == 422, data[:300]
    detail = json.loads(data)["detail"]
    assert field in json.dumps(detail[0]["loc"]), detail
    assert svc.store.jobs() == []


def test_a_solver_breaking_weight_is_refused_and_a_good_job_runs(api_factory) -> None:  # type: ignore[no-untyped-def]
    svc = api_factory()
    status, data = post_job(svc.url, {**GOOD, "priority_weight": 1e-300})
    assert status == 422 and b"priority_weight" in data
    status, data = post_job(svc.url, {**GOOD, "priority_weight": 1e-3})
    assert status == 201, data


def test_ids_and_paths_out_of_range_are_4xx(api_factory) -> None:  # type: ignore[no-untyped-def]
    svc = api_factory()
    for path in (
        "/v1/jobs/9223372036854775808",
        "/v1/jobs/-1",
        "/v1/jobs/99999999999999999999999999/logs",
        "/v1/jobs/1e3",
        "/v1/jobs?limit=0",
        f"/v1/jobs?limit={MAX_PAGE + 1}",
        "/v1/jobs?after=9223372036854775808",
        "/v1/jobs?state=bogus",
        f"/v1/jobs/1/logs?tail={10**12}",
        "/v1/leases/" + "x" * 200,
    ):
        status, data, _ = raw(svc.url, "GET", path)
        assert 400 <= status < 500, (path, status, data[:200])
    status, _, _ = raw(svc.url, "POST", "/v1/jobs/9223372036854775807/cancel")
    assert status == 404


def test_a_50_mb_body_is_refused_before_it_is_read(api_factory) -> None:  # type: ignore[no-untyped-def]
    svc = api_factory()
    parts = urlsplit(svc.url)
    # Announce 50 MB, send 10 bytes: an answer comes at all only if the body was not
    # awaited (the rest never comes; a server waiting for it times the client out).
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    conn.putrequest("POST", "/v1/jobs")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(50 * 1024 * 1024))
    conn.endheaders()
    conn.send(b'{"command"')
    resp = conn.getresponse()
    assert resp.status == 413
    conn.close()
    assert svc.store.jobs() == []


def test_a_chunked_body_over_the_limit_is_refused(api_factory) -> None:  # type: ignore[no-untyped-def]
    svc = api_factory()
    parts = urlsplit(svc.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    big = json.dumps({"command": "x" * (MAX_BODY_BYTES + 10), "steps": 1}).encode()
    chunks = (big[i : i + 65536] for i in range(0, len(big), 65536))
    conn.request(
        "POST",
        "/v1/jobs",
        body=chunks,
        headers={"Content-Type": "application/json"},
        encode_chunked=True,
    )
    assert conn.getresponse().status == 413
    conn.close()


def test_the_job_list_is_paginated(api_factory) -> None:  # type: ignore[no-untyped-def]
    svc = api_factory(round_s=600.0)
    client = ServiceClient(svc.url)
    ids = client.submit_batch([{**GOOD, "name": f"j{i}"} for i in range(25)])
    status, data, headers = raw(svc.url, "GET", "/v1/jobs?limit=10")
    page = json.loads(data)
    assert status == 200 and [j["id"] for j in page] == ids[:10]
    assert headers["x-next-after"] == str(ids[9])
    _, data, _ = raw(svc.url, "GET", f"/v1/jobs?limit=10&after={ids[9]}")
    assert [j["id"] for j in json.loads(data)] == ids[10:20]
    assert [j["id"] for j in client.jobs()] == ids  # the client follows the pages


def test_log_tails_are_bounded_and_streamed(api_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    svc = api_factory(round_s=600.0)
    job_id = ServiceClient(svc.url).submit(GOOD)
    log = Path(svc.log_path(job_id))
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_bytes(b"a" * 300_000 + b"THE END\n")
    status, data, _ = raw(svc.url, "GET", f"/v1/jobs/{job_id}/logs?tail=8")
    assert status == 200 and data == b"THE END\n"
    status, data, _ = raw(svc.url, "GET", f"/v1/jobs/{job_id}/logs?tail={MAX_LOG_TAIL_BYTES}")
    assert status == 200 and len(data) == 300_008
    status, _, _ = raw(svc.url, "GET", f"/v1/jobs/{job_id}/logs?tail={MAX_LOG_TAIL_BYTES + 1}")
    assert status == 422


def test_the_batch_is_all_or_nothing(api_factory) -> None:  # type: ignore[no-untyped-def]
    svc = api_factory(round_s=600.0)
    client = ServiceClient(svc.url)
    rows = [GOOD, GOOD, {**GOOD, "gpus": 64}, GOOD]  # the third cannot fit the cluster
    with pytest.raises(InputError) as err:
        client.submit_batch(rows)
    assert err.value.row == 3 and err.value.field == "gpus"
    assert svc.store.jobs() == []
    assert client.submit_batch([GOOD, GOOD]) == [1, 2]


def test_known_rates_are_admitted_under_canonical_model_names() -> None:
    job = check_job({**GOOD, "rates": {"v100": 1.5, " k80 ": 0.25}})
    assert job.rates == {"V100": 1.5, "K80": 0.25}
    assert check_job(GOOD).rates == {}


def test_cli_and_http_apply_the_same_rules() -> None:
    for bad in (
        {**GOOD, "steps": math.inf},
        {**GOOD, "priority_weight": 1e-300},
        {**GOOD, "rates": {"V100": math.nan}},
    ):
        with pytest.raises(InputError, match="--"):
            check_job(bad, flags=True)
    assert check_job(GOOD).steps == 10
