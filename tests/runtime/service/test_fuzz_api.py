"""Property-based API tests generated from the service's own OpenAPI schema (issue 23,
item 9): for every operation, path and query parameters and JSON bodies are drawn from
the schema's types, limits and property names, mixed with hostile values (NaN, inf,
integers past 2^63, non-ASCII and oversized text, wrong types, unknown keys). No request
may get a 5xx, and every JSON answer must be valid JSON. Bounded: a fixed number of
examples (derandomized, tests/conftest.py), one service on 127.0.0.1, well under a
minute."""

from __future__ import annotations

import http.client
import json
import math
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpumosaic.runtime.api.client import ServiceClient

TOKEN = "fuzz-token"

hostile_numbers = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 2**63, 2**63 - 1, 1e-300, 1e308, math.nan, math.inf, -math.inf]),
)
hostile_text = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", " ", "\x00", "☃", "١٢٣", "../../etc/passwd", "x" * 5000, "NaN", "1e999"]),
)
scalars = st.one_of(st.none(), st.booleans(), hostile_numbers, hostile_text)
hostile_json = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)


def resolve(schema: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    node: Any = spec
    for part in ref.lstrip("#/").split("/"):
        node = node[part]
    return resolve(node, spec)


def typed(schema: dict[str, Any], spec: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Values of ``schema``'s type, around its limits (valid and just outside)."""
    schema = resolve(schema, spec)
    if "anyOf" in schema:
        return st.one_of([typed(s, spec, depth) for s in schema["anyOf"]])
    kind = schema.get("type")
    if kind == "integer":
        low = schema.get("minimum", schema.get("exclusiveMinimum", -(2**64)))
        high = schema.get("maximum", schema.get("exclusiveMaximum", 2**64))
        return st.integers(min_value=int(low) - 2, max_value=int(high) + 2)
    if kind == "number":
        low = schema.get("minimum", schema.get("exclusiveMinimum", -1e12))
        high = schema.get("maximum", schema.get("exclusiveMaximum", 1e12))
        return st.one_of(st.floats(min_value=low, max_value=high), st.sampled_from([low, high]))
    if kind == "string":
        size = schema.get("maxLength", 60)
        return st.one_of(st.text(max_size=min(size, 200)), st.just("s" * (size + 1)))
    if kind == "boolean":
        return st.booleans()
    if kind == "array" and depth < 2:
        return st.lists(typed(schema.get("items", {}), spec, depth + 1), max_size=4)
    if kind == "object" and depth < 2:
        props = schema.get("properties")
        if props:
            need = set(schema.get("required", ()))
            return st.fixed_dictionaries(
                {k: field(v, spec, depth + 1) for k, v in props.items() if k in need},
                optional={k: field(v, spec, depth + 1) for k, v in props.items() if k not in need},
            )
        return st.dictionaries(st.text(max_size=12), st.text(max_size=12), max_size=4)
    return hostile_json


def field(schema: dict[str, Any], spec: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    return st.one_of(typed(schema, spec, depth), typed(schema, spec, depth), scalars)


def operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method.upper(), op)
        for path, item in spec["paths"].items()
        for method, op in item.items()
    ]


@st.composite
def requests(draw: st.DrawFn, spec: dict[str, Any]) -> tuple[str, str, bytes | None]:
    path, method, op = draw(st.sampled_from(operations(spec)))
    query = {}
    for param in op.get("parameters", []):
        value = draw(st.one_of(typed(param["schema"], spec), scalars))
        if param["in"] == "path":
            path = path.replace("{" + param["name"] + "}", quote(str(value), safe=""))
        elif draw(st.booleans()):
            query[param["name"]] = str(value)
    body = None
    content = op.get("requestBody", {}).get("content", {}).get("application/json")
    if content is not None:
        value = draw(st.one_of(typed(content["schema"], spec), hostile_json))
        if isinstance(value, dict) and draw(st.booleans()):
            value[draw(st.text(max_size=8))] = draw(scalars)
        body = json.dumps(value).encode()  # NaN and Infinity included, as JSON5 would send
    if query:
        path += "?" + urlencode(query)
    return method, path, body


def send(url: str, method: str, path: str, body: bytes | None, auth: str) -> tuple[int, str, bytes]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    headers = {"Authorization": auth.encode(), "Content-Type": "application/json"}
    conn.request(method, path, body=body, headers=headers)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, resp.getheader("content-type") or "", data


@pytest.mark.slow
def test_no_generated_request_gets_a_5xx(api_factory) -> None:  # type: ignore[no-untyped-def]
    svc = api_factory(token=TOKEN, round_s=2.0)
    client = ServiceClient(svc.url, TOKEN)
    spec = client.request("GET", "/openapi.json")
    client.submit_batch([{"command": "train", "steps": 1e6, "gpu_milli": 500}] * 6)  # live jobs
    assert len(operations(spec)) >= 10
    seen: set[int] = set()

    @settings(
        max_examples=300,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(request=requests(spec), auth=st.sampled_from([f"Bearer {TOKEN}"] * 4 + ["Bearer ☃", ""]))
    def check(request: tuple[str, str, bytes | None], auth: str) -> None:
        method, path, body = request
        status, kind, data = send(svc.url, method, path, body, auth)
        seen.add(status)
        assert status < 500, (method, path, body[:200] if body else None, status, data[:300])
        if kind.startswith("application/json"):
            json.loads(data)

    check()
    assert svc.health_problem() is None  # the service is still healthy after all of it
    assert {200, 401, 404, 422} <= seen, seen  # every kind of answer was reached
