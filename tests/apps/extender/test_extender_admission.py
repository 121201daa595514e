"""Admission: every quantity by Kubernetes' grammar, finite and bounded; every body
size-bounded before it is buffered; bad values are a 4xx naming the field, never a 500;
the token guards every route but /healthz and the verbs, whatever the header holds."""

from __future__ import annotations

import re
import socket
from decimal import Decimal
from pathlib import Path

import pytest
from extender_builders import app_client, args, binding, cluster, service, v1_pod
from fastapi.testclient import TestClient

from gpumosaic.apps.extender import app as app_module
from gpumosaic.apps.extender.admission import AdmissionError, count, quantity
from gpumosaic.apps.extender.app import create_app
from gpumosaic.apps.extender.server import start_in_thread

FILTER_RESULT_KEYS = {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Decimal("0.5")),  # milli
        ("2", Decimal(2)),
        ("16Gi", Decimal(16 * 2**30)),  # binary SI
        ("1.5k", Decimal(1500)),  # decimal SI
        ("1e3", Decimal(1000)),  # decimal exponent
        ("1E3", Decimal(1000)),  # E followed by digits is an exponent, not exa
        ("2E", Decimal(2 * 10**18)),  # E alone is exa
        ("+1", Decimal(1)),
        (".5", Decimal("0.5")),
        ("1.", Decimal(1)),
        ("-0", Decimal(0)),
        (7, Decimal(7)),  # a JSON integer some clients write
    ],
)
def test_quantities_follow_the_kubernetes_grammar(text, value) -> None:
    assert quantity(text, "cpu") == value


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("\u0663", "not a Kubernetes quantity"),  # Arabic-Indic three: str.isdigit() says yes
        ("\uff15", "not a Kubernetes quantity"),  # full-width five
        ("\u00b2", "not a Kubernetes quantity"),  # superscript two
        ("NaN", "not a Kubernetes quantity"),
        ("inf", "not a Kubernetes quantity"),
        ("Infinity", "not a Kubernetes quantity"),
        ("-1", "must not be negative"),
        ("-0.5Gi", "must not be negative"),
        ("1e309", "out of range"),
        ("9" * 40, "out of range"),
        ("8Ei", "out of range"),  # 2^63 bytes: one past int64
        ("1e1000", "not a Kubernetes quantity"),  # exponents have at most 3 digits
        ("1" * 65, "longer than 64"),
        ("", "not a Kubernetes quantity"),
        ("1.5.5", "not a Kubernetes quantity"),
        ("0x10", "not a Kubernetes quantity"),
        (" 3 ", "not a Kubernetes quantity"),  # the API does not trim either
        (1.5, "must be a quantity string"),  # a JSON float
        (float("nan"), "must be a quantity string"),
        (True, "must be a quantity string"),
        (None, "must be a quantity string"),
    ],
)
def test_bad_quantities_are_named(text, why) -> None:
    with pytest.raises(AdmissionError, match=why) as err:
        quantity(text, "containers[0] cpu")
    assert err.value.status == 422
    assert "containers[0] cpu" in str(err.value)


@pytest.mark.parametrize("text", ["\u0663", "\u00b2", "1" + "0" * 19, "-1", "1.0", "", 3])
def test_integer_annotations_are_ascii_bounded_strings(text) -> None:
    with pytest.raises(AdmissionError):
        count(text, "gpu-count", 1024)


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    return app_client(service(cluster(("V100", 2), ("T4", 1)), tmp_path / "s.db"))


@pytest.mark.parametrize(
    ("notes", "cpu", "named"),
    [
        ({"alibabacloud.com/gpu-milli": "\u0665\u0660\u0660"}, "1", "gpu-milli"),  # was a 500
        ({"alibabacloud.com/gpu-count": "\u00b2"}, "1", "gpu-count"),  # was a 500
        ({"alibabacloud.com/gpu-milli": "1001"}, "1", "over 1000"),
        ({"alibabacloud.com/gpu-count": "99999"}, "1", "over 1024"),
        ({}, "NaN", "cpu='NaN' is not a Kubernetes quantity"),  # was "internal error"
        ({}, "inf", "cpu='inf'"),
        ({}, "\u0663", "cpu="),
        ({}, "-2", "must not be negative"),
        ({}, "1e300", "out of range"),
    ],
)
def test_bad_pods_are_422_naming_the_field(client, notes, cpu, named) -> None:
    pod = v1_pod(annotations=notes, cpu=cpu)
    r = client.post("/filter", json=args(pod, ["n0", "n1"]))
    assert r.status_code == 422, r.text
    body = r.json()
    assert set(body) == FILTER_RESULT_KEYS and named in body["Error"]
    assert body["Error"].startswith("pod team-a/")
    r = client.post("/prioritize", json=args(pod, ["n0", "n1"]))
    assert r.status_code == 422 and named in r.json()["Error"]
    assert client.post("/filter", json=args(v1_pod(milli=100), ["n0"])).status_code == 200


def test_json_that_python_would_read_but_json_does_not_is_400(client) -> None:
    for body in (b'{"Pod": NaN}', b'{"Pod": Infinity}', b'{"Pod": {}, "NodeNames": [1e999]}'):
        r = client.post("/filter", content=body)
        assert r.status_code == 400 and r.json()["Error"]
    huge_int = b'{"PodName": "p", "PodNamespace": "n", "PodUID": 1' + b"0" * 30 + b', "Node": "n0"}'
    assert client.post("/bind", content=huge_int).status_code == 400


def test_names_and_lists_are_bounded(client) -> None:
    r = client.post("/bind", json={**binding(v1_pod(), "n0"), "PodName": "p" * 300})
    assert r.status_code == 400 and "PodName" in r.json()["Error"]
    pod = v1_pod()
    pod["metadata"]["name"] = "x" * 300
    assert client.post("/filter", json=args(pod, ["n0"])).status_code == 422
    r = client.delete("/pods/" + "n" * 300 + "/p")
    assert r.status_code == 422


def test_a_body_over_the_limit_is_413(client, monkeypatch) -> None:
    monkeypatch.setattr(app_module, "MAX_ARGS_BYTES", 10_000)
    body = args(v1_pod(), ["n0"] * 5_000)
    r = client.post("/filter", json=body)
    assert r.status_code == 413 and "larger than 10000 bytes" in r.json()["Error"]
    r = client.post("/bind", json={**binding(v1_pod(), "n0"), "pad": "x" * 70_000})
    assert r.status_code == 413


def _raw_exchange(url: str, head: bytes, chunks: list[bytes]) -> bytes:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head)
        for chunk in chunks:
            sock.sendall(chunk)
        return sock.recv(65536)


def test_the_limit_is_enforced_before_the_body_is_buffered(tmp_path: Path, monkeypatch) -> None:
    """A declared 1 TB body is refused at once, with no byte of it sent; a chunked body
    is refused as soon as it passes the limit, not after it ends."""
    monkeypatch.setattr(app_module, "MAX_ARGS_BYTES", 4096)
    svc = service(cluster(("V100", 1)), tmp_path / "s.db")
    server = start_in_thread(create_app(svc))
    try:
        head = (
            b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000000000\r\n\r\n"
        )
        assert _raw_exchange(server.url, head, []).startswith(b"HTTP/1.1 413")
        head = (
            b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b"1000\r\n" + b" " * 4096 + b"\r\n"  # two of these pass the limit
        assert _raw_exchange(server.url, head, [chunk, chunk]).startswith(b"HTTP/1.1 413")
    finally:
        server.stop()


@pytest.fixture
def guarded(tmp_path: Path) -> TestClient:
    svc = service(cluster(("V100", 1)), tmp_path / "s.db")
    return TestClient(create_app(svc, token="s3cret"), raise_server_exceptions=False)


def test_the_docs_page_loads_nothing_from_another_host(guarded) -> None:
    auth = {"Authorization": "Bearer s3cret"}
    page = guarded.get("/docs", headers=auth).text
    assert guarded.get("/redoc", headers=auth).text == page
    urls = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert urls and all(u.startswith("/docs/assets/") for u in urls), urls
    assert '"/filter"' in page  # the verbs' schema, inlined
    for url in urls:
        assert guarded.get(url).status_code == 401  # the gate covers the files too
        assert len(guarded.get(url, headers=auth).content) > 100_000, url


@pytest.mark.parametrize("path", ["/docs", "/redoc", "/openapi.json", "/state", "/metrics"])
def test_a_token_guards_the_docs_and_the_views(guarded, path) -> None:
    assert guarded.get(path).status_code == 401
    assert guarded.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert guarded.get(path, headers={"Authorization": "Bearer s3cret"}).status_code == 200


def test_a_non_ascii_authorization_header_is_401_not_500(guarded) -> None:
    for raw in ("Bearer s3cr\u00e9t".encode("latin-1"), "Bearer \u2603".encode(), b"\xff\xfe"):
        r = guarded.get("/state", headers={"Authorization": raw})  # type: ignore[dict-item]
        assert r.status_code == 401, raw
    r = guarded.delete("/pods/a/b", headers={"Authorization": b"Bearer \xe9"})  # type: ignore[dict-item]
    assert r.status_code == 401


def test_healthz_and_the_verbs_stay_open_for_kube_scheduler(guarded) -> None:
    assert guarded.get("/healthz").status_code == 200
    pod = v1_pod(milli=100)
    assert guarded.post("/filter", json=args(pod, ["n0"])).json()["NodeNames"] == ["n0"]
