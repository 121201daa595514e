"""The API-server side through the official client, against recorded responses of the
real API shapes served over loopback (fake_apiserver.py). No cluster runs here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from extender_builders import args, binding, workload
from fake_apiserver import FakeApiServer
from kubernetes import client

from gpumosaic.apps.extender.kube import KubeBackend, Watcher
from gpumosaic.apps.extender.server import start_in_thread
from gpumosaic.apps.extender.service import ExtenderService
from gpumosaic.apps.extender.target import TargetSource
from gpumosaic.apps.extender.wire import ExtenderArgs, ExtenderBindingArgs
from waiting import wait_for


@pytest.fixture
def api() -> Iterator[tuple[FakeApiServer, KubeBackend]]:
    fake = FakeApiServer()
    server = start_in_thread(fake.app)
    configuration = client.Configuration()
    configuration.host = server.url
    try:
        yield fake, KubeBackend(client.ApiClient(configuration))
    finally:
        server.stop()


def _service(backend: KubeBackend) -> ExtenderService:
    return ExtenderService(backend, "fgd", TargetSource(workload((1, 500), (2, 1000)), 10, 5))


def test_start_rebuilds_every_gpu_from_the_pods_annotations(api) -> None:
    _, backend = api
    svc = _service(backend)
    table = svc.nodes
    assert table.names == ["gpu-a", "gpu-b", "cpu-c"]
    a, b, c = (table.index[n] for n in ("gpu-a", "gpu-b", "cpu-c"))
    s = table.state
    # bert-0 holds 500 of GPU 3, resnet-0 GPUs 0-1; done-0 (Succeeded) holds nothing
    assert s.gpu_free[a, :8].tolist() == [0, 0, 1000, 500, 1000, 1000, 1000, 1000]
    assert s.cpu_capacity[a] == 95_500 and s.cpu_free[a] == 95_500 - 12_000
    assert s.num_gpus[b] == 2 and s.node_model[b] != s.node_model[a]
    assert s.num_gpus[c] == 0 and s.cpu_free[c] == 63_800 - 100  # coredns, CPU only
    assert len(svc.held()) == 3


def test_bind_patches_annotations_before_creating_the_binding(api) -> None:
    fake, backend = api
    svc = _service(backend)
    pod = fake.pod("research", "pending-0")
    svc.filter(ExtenderArgs.model_validate(args(pod, ["gpu-a", "gpu-b"])))
    result = svc.bind(ExtenderBindingArgs.model_validate(binding(pod, "gpu-b")))
    assert result == {"Error": ""}
    (verb1, name1, patch), (verb2, name2, body) = fake.writes
    assert (verb1, name1, verb2, name2) == ("patch", "pending-0", "binding", "pending-0")
    content_type, patch_body = patch
    assert content_type == "application/strategic-merge-patch+json"
    notes = patch_body["metadata"]["annotations"]
    assert notes["alibabacloud.com/gpu-index"] in ("0", "1")
    assert notes["alibabacloud.com/assume-time"].isdigit()
    assert body["target"] == {"apiVersion": "v1", "kind": "Node", "name": "gpu-b"}
    assert body["metadata"]["uid"] == pod["metadata"]["uid"]


def test_a_refused_binding_frees_the_reservation_and_names_the_reason(api) -> None:
    fake, backend = api
    svc = _service(backend)
    fake.conflicts.add("pending-0")
    pod = fake.pod("research", "pending-0")
    before = svc.nodes.state.gpu_free.copy()
    result = svc.bind(ExtenderBindingArgs.model_validate(binding(pod, "gpu-a")))
    assert "409" in result["Error"] and "already assigned" in result["Error"]
    assert (svc.nodes.state.gpu_free == before).all()  # nothing kept for the failed bind
    assert svc.counters.bind_errors == 1


def test_bind_of_a_pod_never_filtered_reads_it_from_the_api(api) -> None:
    fake, backend = api
    svc = _service(backend)
    pod = fake.pod("research", "pending-0")
    assert svc.bind(ExtenderBindingArgs.model_validate(binding(pod, "gpu-a")))["Error"] == ""
    missing = {**binding(pod, "gpu-a"), "PodName": "ghost", "PodUID": "nope"}
    error = svc.bind(ExtenderBindingArgs.model_validate(missing))["Error"]
    assert "was not filtered by this extender" in error


def test_the_watch_frees_deleted_pods_and_follows_nodes(api) -> None:
    fake, backend = api
    svc = _service(backend)
    watcher = Watcher(backend, svc, timeout_s=1)
    watcher.start()
    try:
        a = svc.nodes.index["gpu-a"]
        bert = fake.pod("research", "bert-0")
        fake.push("pods", "DELETED", bert)
        wait_for(lambda: svc.nodes.state.gpu_free[a, 3] == 1000, 60, "GPU 3 of gpu-a freed")
        resnet = fake.pod("research", "resnet-0")
        fake.push("pods", "MODIFIED", {**resnet, "status": {"phase": "Failed"}})
        wait_for(lambda: svc.nodes.state.gpu_free[a, 0] == 1000, 60, "GPU 0 of gpu-a freed")
        new_node = {
            **fake.nodes["items"][1],
            "metadata": {**fake.nodes["items"][1]["metadata"], "name": "gpu-d"},
        }
        fake.push("nodes", "ADDED", new_node)
        wait_for(lambda: "gpu-d" in svc.nodes.index, 60, "the new node gpu-d in the table")
        assert len(svc.held()) == 1  # coredns survives the rebuild
    finally:
        watcher.stop()


def test_no_api_server_is_a_one_line_error(tmp_path) -> None:
    from gpumosaic.errors import InputError

    with pytest.raises(InputError, match="use --cluster for the standalone mode"):
        KubeBackend.connect(tmp_path / "missing-kubeconfig")
