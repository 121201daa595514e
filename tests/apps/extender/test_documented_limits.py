"""Documented limits enforced (issue 35, class 6): containers and init containers count
together against the pod's limit of 1,000; an integer beyond int64 is refused wherever
it is in the body, a field the extender ignores included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from extender_builders import app_client, args, cluster, service, v1_pod
from fastapi.testclient import TestClient

from gpumosaic.apps.extender.admission import MAX_CONTAINERS


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    return app_client(service(cluster(("V100", 2)), tmp_path / "s.db"))


@pytest.mark.parametrize(("containers", "inits"), [(600, 401), (1000, 1000), (1, 1000)])
def test_containers_and_init_containers_count_together(client, containers, inits) -> None:  # type: ignore[no-untyped-def]
    pod = v1_pod()
    one = pod["spec"]["containers"][0]
    pod["spec"]["containers"] = [dict(one, name=f"c{i}") for i in range(containers)]
    pod["spec"]["initContainers"] = [dict(one, name=f"i{i}") for i in range(inits)]
    r = client.post("/filter", json=args(pod, ["n0"]))
    assert r.status_code == 422 and f"over {MAX_CONTAINERS} in all" in r.json()["Error"], r.text


def test_at_the_limit_is_accepted(client) -> None:  # type: ignore[no-untyped-def]
    pod = v1_pod()
    one = pod["spec"]["containers"][0]
    pod["spec"]["containers"] = [dict(one, name=f"c{i}") for i in range(600)]
    pod["spec"]["initContainers"] = [dict(one, name=f"i{i}") for i in range(400)]
    assert client.post("/filter", json=args(pod, ["n0"])).status_code == 200


@pytest.mark.parametrize("number", [2**63, 2**64 - 1, -(2**63) - 1])
def test_an_integer_beyond_int64_in_an_ignored_field_is_400(client, number: int) -> None:  # type: ignore[no-untyped-def]
    body = args(v1_pod(), ["n0"])
    body["Pod"]["metadata"]["generation"] = 0  # a field the extender never reads
    raw = json.dumps(body).replace('"generation": 0', f'"generation": {number}')
    r = client.post("/filter", content=raw.encode())
    assert r.status_code == 400 and "int64" in r.json()["Error"], r.text
    ok = json.dumps(body).replace('"generation": 0', f'"generation": {2**63 - 1}')
    assert client.post("/filter", content=ok.encode()).status_code == 200
