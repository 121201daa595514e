"""The extender/v1 wire format: keys of the Go structs, both nodeCacheCapable modes,
golden bodies, and the HTTP status rules (200 + Error, 400 for a body that is not JSON)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from extender_builders import app_client, args, binding, cluster, service, v1_node, v1_pod

# Field names of k8s.io/kube-scheduler/extender/v1 types.go (no JSON tags in Go).
FILTER_RESULT_KEYS = {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
HOST_PRIORITY_KEYS = {"Host", "Score"}
BINDING_RESULT_KEYS = {"Error"}
GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture
def svc(tmp_path: Path):
    # n0: 2 x V100, n1: 1 x T4, n2: 8 x A100
    return service(cluster(("V100", 2), ("T4", 1), ("A100", 8)), tmp_path / "state.db")


def test_node_cache_capable_filter_returns_a_subset_of_names(svc) -> None:
    c = app_client(svc)
    pod = v1_pod(count=4)
    r = c.post("/filter", json=args(pod, ["n0", "n1", "n2", "ghost"]))
    assert r.status_code == 200
    body = r.json()
    assert set(body) == FILTER_RESULT_KEYS
    assert body["Nodes"] is None
    assert body["NodeNames"] == ["n2"]  # only the 8-GPU node holds 4 whole GPUs
    assert body["Error"] == ""
    # too few GPUs even when empty, or not ours: preemption cannot help
    assert set(body["FailedAndUnresolvableNodes"]) == {"n0", "n1", "ghost"}
    assert body["FailedAndUnresolvableNodes"]["ghost"].startswith("unknown node")


def test_full_nodes_filter_returns_the_passing_node_objects_unchanged(svc) -> None:
    c = app_client(svc)
    nodes = [v1_node("n0", "V100", 2), v1_node("n1", "T4", 1), v1_node("n2", "A100", 8)]
    pod = v1_pod(milli=300, models="T4|A100")
    r = c.post("/filter", json={"Pod": pod, "Nodes": {"metadata": {}, "items": nodes}})
    body = r.json()
    assert r.status_code == 200 and body["NodeNames"] is None
    assert body["Nodes"]["items"] == [nodes[1], nodes[2]]
    assert body["FailedAndUnresolvableNodes"] == {
        "n0": "never_fits: the node's GPU model is not in {A100|T4}"
    }


def test_prioritize_is_a_bare_array_scored_0_to_10_with_the_choice_on_top(svc) -> None:
    c = app_client(svc)
    pod = v1_pod(milli=500)
    r = c.post("/prioritize", json=args(pod, ["n0", "n1", "n2"]))
    scores = r.json()
    assert r.status_code == 200 and isinstance(scores, list)
    assert all(set(s) == HOST_PRIORITY_KEYS for s in scores)
    assert [s["Host"] for s in scores] == ["n0", "n1", "n2"]
    assert all(0 <= s["Score"] <= 10 for s in scores)
    assert sum(s["Score"] == 10 for s in scores) == 1  # the strategy's node, alone on top


def test_bind_writes_gpu_index_and_answers_an_empty_error(svc) -> None:
    c = app_client(svc)
    pod = v1_pod(milli=500)
    c.post("/filter", json=args(pod, ["n1"]))
    r = c.post("/bind", json=binding(pod, "n1"))
    assert r.status_code == 200 and r.json() == {"Error": ""}
    assert set(r.json()) == BINDING_RESULT_KEYS
    state = c.get("/state").json()
    n1 = next(n for n in state["nodes"] if n["name"] == "n1")
    assert n1["gpus"] == [
        {"index": 0, "milli_free": 500, "pods": [f"team-a/{pod['metadata']['name']}:500"]}
    ]
    # the same bind again (kube-scheduler retried): the same answer, nothing doubled
    assert c.post("/bind", json=binding(pod, "n1")).json() == {"Error": ""}
    assert c.get("/state").json()["gpu_milli_allocated"] == 500


def test_an_unreadable_pod_is_422_in_the_filter_result_shape(svc) -> None:
    c = app_client(svc)
    bad = v1_pod(milli=500, count=2)
    r = c.post("/filter", json=args(bad, ["n0"]))
    assert r.status_code == 422 and set(r.json()) == FILTER_RESULT_KEYS
    assert (
        "gpu-milli=500 below 1000 is only allowed with alibabacloud.com/gpu-count=1"
        in r.json()["Error"]
    )
    r = c.post("/prioritize", json=args(bad, ["n0"]))
    assert r.status_code == 422 and "gpu-count=1" in r.json()["Error"]


def test_logical_failures_are_200_with_a_named_error(svc) -> None:
    c = app_client(svc)
    unknown = v1_pod(milli=500)
    r = c.post("/bind", json=binding(unknown, "n0"))
    assert r.status_code == 200 and "was not filtered by this extender" in r.json()["Error"]
    c.post("/filter", json=args(unknown, ["n0"]))
    r = c.post("/bind", json=binding(unknown, "nowhere"))
    assert r.json()["Error"] == "unknown node 'nowhere': not in the extender's cluster"


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"", b"[1, 2]", b'{"NodeNames": ["n0"]}', b'{"Pod": {}, "NodeNames": "n0"}'],
)
def test_malformed_bodies_are_400_with_a_message(svc, body: bytes) -> None:
    c = app_client(svc)
    for verb in ("filter", "prioritize", "bind"):
        r = c.post(f"/{verb}", content=body)
        assert r.status_code == 400
        assert r.json()["Error"]


def test_verbs_follow_the_configured_paths(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from gpumosaic.apps.extender.app import Verbs, create_app

    svc = service(cluster(("V100", 1)), tmp_path / "s.db")
    c = TestClient(create_app(svc, Verbs("gpumosaic/v1", "f", "p", "b")))
    pod = v1_pod(milli=100)
    assert c.post("/gpumosaic/v1/f", json=args(pod, ["n0"])).json()["NodeNames"] == ["n0"]
    assert c.post("/filter", json=args(pod, ["n0"])).status_code == 404


@pytest.mark.parametrize("case", ["node_cache_capable", "full_nodes"])
def test_golden_bodies(tmp_path: Path, case: str) -> None:
    """Bodies written by hand from the Go types (golden/*.json); the answers must match
    them key for key, value for value."""
    golden = json.loads((GOLDEN / f"{case}.json").read_text())
    svc = service(cluster(("V100", 2), ("T4", 1), ("A100", 8)), tmp_path / "s.db", seed=3)
    c = app_client(svc)
    for step in golden["exchange"]:
        r = c.post(step["path"], json=step["request"])
        assert r.status_code == 200, step["path"]
        assert r.json() == step["response"], step["path"]


def test_metrics_count_requests_and_allocation(svc) -> None:
    c = app_client(svc)
    pod = v1_pod(milli=500)
    c.post("/filter", json=args(pod, ["n1"]))
    c.post("/bind", json=binding(pod, "n1"))
    c.post("/filter", content=b"nope")
    text = c.get("/metrics").text
    assert 'gpumosaic_extender_requests_total{outcome="ok",verb="filter"} 1.0' in text
    assert 'gpumosaic_extender_requests_total{outcome="bad_request",verb="filter"} 1.0' in text
    assert 'gpumosaic_extender_request_seconds_bucket{le="0.01",verb="bind"}' in text
    assert "gpumosaic_extender_gpu_milli_allocated 500.0" in text
    assert "gpumosaic_extender_gpus_allocated 1.0" in text
    assert "gpumosaic_extender_gpu_milli_capacity 11000.0" in text
    rate = next(
        ln for ln in text.splitlines() if ln.startswith("gpumosaic_extender_fragmentation_rate ")
    )
    assert 0.0 <= float(rate.split()[1]) <= 1.0
