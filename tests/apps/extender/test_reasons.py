"""The extender explains a failed node through the filter: its reason code for a node is
what ``placement.filter.explain`` says when the cluster is that node alone (table of
cases over nodes that fail for CPU, memory, GPUs, model and size)."""

from __future__ import annotations

from pathlib import Path

import pytest
from extender_builders import args, binding, v1_pod
from fastapi.testclient import TestClient

from gpumosaic.apps.extender.app import create_app
from gpumosaic.apps.extender.service import ExtenderService
from gpumosaic.apps.extender.sqlite_store import SqliteBackend
from gpumosaic.apps.extender.target import TargetSource
from gpumosaic.apps.extender.vocabulary import pod_request
from gpumosaic.model.cluster import ClusterSpec, NodeSpec
from gpumosaic.model.gpu import gpu_model
from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement.filter import explain

# n0: little CPU, n1: one T4, n2: eight A100, n3: little memory
SPEC = ClusterSpec(
    (
        NodeSpec("n0", gpu_model("V100"), 2, 8_000, 32_768),
        NodeSpec("n1", gpu_model("T4"), 1, 64_000, 262_144),
        NodeSpec("n2", gpu_model("A100"), 8, 64_000, 262_144),
        NodeSpec("n3", gpu_model("V100"), 4, 64_000, 65_536),
    )
)
NAMES = ["n0", "n1", "n2", "n3", "ghost"]


@pytest.fixture(scope="module")
def loaded(tmp_path_factory) -> tuple[ExtenderService, TestClient]:
    """n0: 6 CPUs and 600 milli of GPU 0 taken; n3: 60 GiB and three GPUs taken."""
    db: Path = tmp_path_factory.mktemp("reasons") / "s.db"
    source = TargetSource(None, 50, 5)
    svc = ExtenderService(SqliteBackend(SPEC, db, "reasons"), "bestfit", source)
    c = TestClient(create_app(svc), raise_server_exceptions=False)
    for pod, node in (
        (v1_pod(milli=600, cpu="6"), "n0"),
        (v1_pod(count=3, memory="60Gi"), "n3"),
    ):
        assert c.post("/filter", json=args(pod, [node])).json()["NodeNames"] == [node]
        assert c.post("/bind", json=binding(pod, node)).json() == {"Error": ""}
    return svc, c


def _alone(svc: ExtenderService, node: int) -> ClusterState:
    """The node by itself, holding what it holds in the extender."""
    state = ClusterState(ClusterSpec((SPEC.nodes[node],)))
    for _, a, _ in svc.held():
        if a.node == node:
            state.allocate(Assignment(a.job_id, 0, a.gpus, a.gpu_milli, a.cpu_milli, a.memory_mib))
    return state


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (dict(milli=500, cpu="4"), {"n0": "cpu"}),
        (dict(milli=500, memory="8Gi"), {"n3": "memory"}),
        (dict(count=2), {"n0": "gpu", "n1": "never_fits", "n3": "gpu"}),
        (
            dict(milli=300, models="T4"),
            {"n0": "never_fits", "n2": "never_fits", "n3": "never_fits"},
        ),
        (dict(cpu="100"), dict.fromkeys(("n0", "n1", "n2", "n3"), "never_fits")),
        (dict(cpu="4"), {"n0": "cpu"}),  # CPU-only
        (dict(count=8), {"n0": "never_fits", "n1": "never_fits", "n3": "never_fits"}),
        (dict(count=2, cpu="3", memory="8Gi"), {"n0": "cpu", "n1": "never_fits", "n3": "memory"}),
        (dict(milli=700, models="V100"), {"n1": "never_fits", "n2": "never_fits"}),
    ],
)
def test_the_extenders_reasons_are_the_filters(loaded, pod, expected) -> None:
    svc, c = loaded
    body = c.post("/filter", json=args(v1_pod(**pod), NAMES)).json()
    reasons = {**body["FailedNodes"], **body["FailedAndUnresolvableNodes"]}
    assert reasons.pop("ghost").startswith("unknown node")  # not a filter reason
    codes = {name: text.split(":")[0] for name, text in reasons.items()}
    assert codes == expected
    request = pod_request(v1_pod(**pod)).job(99)
    for i, name in enumerate(NAMES[:-1]):
        if name in codes:
            assert codes[name] == explain(_alone(svc, i), request).reason.value, name
        else:
            assert name in body["NodeNames"]
    # never_fits (and unknown) go where kube-scheduler does not try preemption
    assert all(not v.startswith("never_fits") for v in body["FailedNodes"].values())
