"""The kubelet device plugin, against a stand-in kubelet speaking the v1beta1 API over gRPC."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from waiting import wait_for

grpc = pytest.importorskip("grpc")

from gpumosaic.runtime.share import deviceplugin_api as api  # noqa: E402
from gpumosaic.runtime.share.deviceplugin import (  # noqa: E402
    CONTAINER_LIB,
    PLUGIN_SOCKET,
    RESOURCE,
    SharePlugin,
    SlotPlan,
)


class FakeKubelet:
    """The kubelet's Registration service on DIR/kubelet.sock."""

    def __init__(self, plugin_dir: Path) -> None:
        self.requests: list = []
        self.server = grpc.server(ThreadPoolExecutor(max_workers=2))
        handler = api.service_handler("Registration", {"Register": self.register})
        self.server.add_generic_rpc_handlers((handler,))
        self.server.add_insecure_port(f"unix://{plugin_dir / api.KUBELET_SOCKET}")
        self.server.start()
        self.registered = threading.Event()

    def register(self, request, context):
        self.requests.append(request)
        self.registered.set()
        return api.message("Empty")()


@pytest.fixture
def plugin(tmp_path):
    plugin_dir, sock_dir = tmp_path / "dp", tmp_path / "s"
    plugin_dir.mkdir()
    sock_dir.mkdir()
    (sock_dir / "gpu0.sock").touch()  # GPU 0 has a daemon, GPU 1 not yet
    kubelet = FakeKubelet(plugin_dir)
    plan = SlotPlan((0, 1), 3, sock_dir, tmp_path / "lib" / "libgpumosaic_share.so")
    dp = SharePlugin(plan, plugin_dir, health_interval_s=0.1)
    dp.start()
    channel = grpc.insecure_channel(f"unix://{plugin_dir / PLUGIN_SOCKET}")
    yield dp, kubelet, api.stub(channel, "DevicePlugin"), sock_dir
    channel.close()
    dp.stop()
    kubelet.server.stop(0)


def test_registers_and_lists_slots_with_health(plugin) -> None:
    _, kubelet, calls, sock_dir = plugin
    (req,) = kubelet.requests
    assert (req.version, req.endpoint, req.resource_name) == ("v1beta1", PLUGIN_SOCKET, RESOURCE)
    assert req.options.get_preferred_allocation_available
    options = calls["GetDevicePluginOptions"](api.message("Empty")(), timeout=5)
    assert options.get_preferred_allocation_available and not options.pre_start_required
    stream = calls["ListAndWatch"](api.message("Empty")(), timeout=10)
    first = next(stream)
    health = {d.ID: d.health for d in first.devices}
    assert health == {
        **{f"gpu0-slot{k}": "Healthy" for k in range(3)},
        **{f"gpu1-slot{k}": "Unhealthy" for k in range(3)},
    }
    (sock_dir / "gpu1.sock").touch()  # GPU 1's daemon comes up: an update is streamed
    second = next(stream)
    assert all(d.health == "Healthy" for d in second.devices)
    stream.cancel()


def test_preferred_allocation_keeps_one_gpu_and_spreads(plugin) -> None:
    _, _, calls, _ = plugin
    request = api.message("PreferredAllocationRequest")()
    request.container_requests.add(
        available_deviceIDs=["gpu0-slot0", "gpu1-slot0", "gpu1-slot1", "gpu0-slot2", "gpu1-slot2"],
        allocation_size=2,
    )
    request.container_requests.add(
        available_deviceIDs=["gpu0-slot0", "gpu0-slot1", "gpu1-slot0"],
        must_include_deviceIDs=["gpu0-slot1"],
        allocation_size=2,
    )
    response = calls["GetPreferredAllocation"](request, timeout=5)
    first, second = (list(r.deviceIDs) for r in response.container_responses)
    assert first == ["gpu1-slot0", "gpu1-slot1"]  # the GPU with the most free slots
    assert second == ["gpu0-slot1", "gpu0-slot0"]  # stays on the must-include slot's GPU


def test_allocate_injects_preload_socket_and_mounts(plugin, tmp_path) -> None:
    _, _, calls, sock_dir = plugin
    request = api.message("AllocateRequest")()
    request.container_requests.add(devices_ids=["gpu1-slot2"])
    (resp,) = calls["Allocate"](request, timeout=5).container_responses
    assert dict(resp.envs) == {
        "LD_PRELOAD": CONTAINER_LIB,
        "GPUMOSAIC_SHARE_SOCKET": "/var/run/gpumosaic-share/gpu1.sock",
        "NVIDIA_VISIBLE_DEVICES": "1",
    }
    mounts = {m.container_path: (m.host_path, m.read_only) for m in resp.mounts}
    assert mounts == {
        CONTAINER_LIB: (str(tmp_path / "lib" / "libgpumosaic_share.so"), True),
        "/var/run/gpumosaic-share": (str(sock_dir), False),
    }
    bad = api.message("AllocateRequest")()
    bad.container_requests.add(devices_ids=["nvidia0"])
    with pytest.raises(grpc.RpcError) as err:
        calls["Allocate"](bad, timeout=5)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_wire_bytes_match_the_kubelet_api() -> None:
    # Field numbers of v1beta1: RegisterRequest{version=1, endpoint=2, resource_name=3}.
    req = api.message("RegisterRequest")(version="v1beta1", endpoint="a", resource_name="b/c")
    assert req.SerializeToString() == b"\n\x07v1beta1\x12\x01a\x1a\x03b/c"
    # ContainerAllocateResponse.envs is map field 1 (entry: key=1, value=2).
    resp = api.message("ContainerAllocateResponse")()
    resp.envs["K"] = "V"
    assert resp.SerializeToString() == b"\n\x06\n\x01K\x12\x01V"


def test_reregisters_when_the_kubelet_restarts(tmp_path) -> None:
    plugin_dir, sock_dir = tmp_path / "dp", tmp_path / "s"
    plugin_dir.mkdir()
    sock_dir.mkdir()
    first = FakeKubelet(plugin_dir)
    dp = SharePlugin(
        SlotPlan((0,), 2, sock_dir, tmp_path / "lib.so"), plugin_dir, health_interval_s=0.05
    )
    thread = threading.Thread(target=dp.serve_forever, daemon=True)
    thread.start()
    try:
        assert first.registered.wait(5)
        wait_for(lambda: dp._kubelet_id, 120, "the kubelet's reply", poll_s=0.01)
        first.server.stop(0).wait()
        (plugin_dir / api.KUBELET_SOCKET).unlink(missing_ok=True)
        (plugin_dir / PLUGIN_SOCKET).unlink()  # a restarting kubelet wipes the directory
        second = FakeKubelet(plugin_dir)
        assert second.registered.wait(5)
        assert (plugin_dir / PLUGIN_SOCKET).exists()
        second.server.stop(0)
    finally:
        dp.stop()
        thread.join(5)
