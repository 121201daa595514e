"""A kubelet device plugin for gpumosaic share: ``slots`` schedulable slots per GPU.

Like nvshare's plugin, it advertises ``gpumosaic.io/share`` devices (default 10 per GPU,
ids ``gpu<N>-slot<K>``) and, when the kubelet allocates slots to a container, answers with
what the container needs to share that GPU: ``LD_PRELOAD`` of the interposer,
``GPUMOSAIC_SHARE_SOCKET`` of the GPU's daemon socket, ``NVIDIA_VISIBLE_DEVICES``, and
the two mounts (the library, read-only, and the socket directory). A GPU's slots are
healthy while its daemon socket exists. The plugin re-registers when the kubelet
restarts (the kubelet then wipes the plugin directory).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpumosaic.runtime.share import deviceplugin_api as api
from gpumosaic.runtime.share.native import ShareError
from gpumosaic.runtime.share.sockets import socket_path

RESOURCE = "gpumosaic.io/share"
PLUGIN_SOCKET = "gpumosaic-share.sock"
DEFAULT_SLOTS = 10  # nvshare's NVSHARE_VIRTUAL_DEVICES default
CONTAINER_LIB = "/opt/gpumosaic-share/libgpumosaic_share.so"
CONTAINER_SOCKET_DIR = "/var/run/gpumosaic-share"
_SLOT = re.compile(r"^gpu(\d+)-slot(\d+)$")


def slot_id(gpu: int, slot: int) -> str:
    return f"gpu{gpu}-slot{slot}"


def slot_gpu(device_id: str) -> int:
    m = _SLOT.match(device_id)
    if not m:
        raise ValueError(f"not a gpumosaic share slot: {device_id!r}")
    return int(m.group(1))


@dataclass(frozen=True, slots=True)
class SlotPlan:
    """What the plugin advertises and hands out; pure, no I/O but the health probe."""

    gpus: tuple[int, ...]
    slots: int
    socket_dir: Path  # the daemon's socket directory on the host
    lib_path: Path  # the interposer on the host

    def devices(self) -> list[tuple[str, bool]]:
        """(slot id, healthy) for every slot: healthy while the GPU's daemon socket exists."""
        out = []
        for gpu in self.gpus:
            healthy = socket_path(self.socket_dir, gpu).exists()
            out += [(slot_id(gpu, k), healthy) for k in range(self.slots)]
        return out

    def preferred(self, available: Sequence[str], must: Sequence[str], size: int) -> list[str]:
        """Slots of as few GPUs as possible (one socket per process), starting with the GPU
        that has the most free slots, so that tenants spread over the GPUs."""
        chosen = list(dict.fromkeys(must))[:size]
        free = Counter(slot_gpu(d) for d in available if d not in chosen)
        wanted = [slot_gpu(d) for d in chosen]
        order = sorted(free, key=lambda g: (g not in wanted, -free[g], g))
        for gpu in order:
            for device in available:
                if len(chosen) >= size:
                    return chosen
                if device not in chosen and slot_gpu(device) == gpu:
                    chosen.append(device)
        return chosen

    def allocate(self, device_ids: Sequence[str]) -> Any:
        """The ContainerAllocateResponse for one container's slots."""
        gpus = sorted({slot_gpu(d) for d in device_ids})
        if not gpus:
            raise ValueError("no slots to allocate")
        response = api.message("ContainerAllocateResponse")()
        response.envs["LD_PRELOAD"] = CONTAINER_LIB
        # One process is gated by one GPU's lock: the first of its GPUs.
        response.envs["GPUMOSAIC_SHARE_SOCKET"] = f"{CONTAINER_SOCKET_DIR}/gpu{gpus[0]}.sock"
        response.envs["NVIDIA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpus)
        lib = response.mounts.add()
        lib.container_path, lib.host_path, lib.read_only = CONTAINER_LIB, str(self.lib_path), True
        sockets = response.mounts.add()
        sockets.container_path, sockets.host_path = CONTAINER_SOCKET_DIR, str(self.socket_dir)
        return response


class SharePlugin:
    """The gRPC side: serve DevicePlugin on ``plugin_dir``, register with the kubelet."""

    def __init__(
        self,
        plan: SlotPlan,
        plugin_dir: Path = Path(api.DEVICE_PLUGIN_PATH),
        resource: str = RESOURCE,
        health_interval_s: float = 5.0,
    ) -> None:
        self.plan = plan
        self.plugin_dir = plugin_dir
        self.resource = resource
        self.health_interval_s = health_interval_s
        self.endpoint = plugin_dir / PLUGIN_SOCKET
        self._grpc = api.grpc_module()
        self._server: Any = None
        self._stop = threading.Event()
        self._changed = threading.Condition()
        self._kubelet_id: tuple[int, int] | None = None

    # --- DevicePlugin service -------------------------------------------------------------

    def _device_list(self) -> Any:
        response = api.message("ListAndWatchResponse")()
        for device_id, healthy in self.plan.devices():
            response.devices.add(ID=device_id, health=api.HEALTHY if healthy else api.UNHEALTHY)
        return response

    def get_options(self, request: Any, context: Any) -> Any:
        return api.message("DevicePluginOptions")(get_preferred_allocation_available=True)

    def list_and_watch(self, request: Any, context: Any) -> Iterator[Any]:
        last = self._device_list()
        yield last
        while not self._stop.is_set() and context.is_active():
            with self._changed:
                self._changed.wait(self.health_interval_s)
            current = self._device_list()
            if current != last:
                last = current
                yield current

    def preferred(self, request: Any, context: Any) -> Any:
        response = api.message("PreferredAllocationResponse")()
        for req in request.container_requests:
            chosen = self.plan.preferred(
                list(req.available_deviceIDs), list(req.must_include_deviceIDs), req.allocation_size
            )
            response.container_responses.add(deviceIDs=chosen)
        return response

    def allocate(self, request: Any, context: Any) -> Any:
        response = api.message("AllocateResponse")()
        try:
            for req in request.container_requests:
                response.container_responses.append(self.plan.allocate(list(req.devices_ids)))
        except ValueError as err:
            context.abort(self._grpc.StatusCode.INVALID_ARGUMENT, str(err))
        return response

    def pre_start(self, request: Any, context: Any) -> Any:
        return api.message("PreStartContainerResponse")()

    # --- life cycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Serve on the plugin socket and register with the kubelet."""
        with contextlib.suppress(FileNotFoundError):
            self.endpoint.unlink()
        server = self._grpc.server(ThreadPoolExecutor(max_workers=8))
        handler = api.service_handler(
            "DevicePlugin",
            {
                "GetDevicePluginOptions": self.get_options,
                "ListAndWatch": self.list_and_watch,
                "GetPreferredAllocation": self.preferred,
                "Allocate": self.allocate,
                "PreStartContainer": self.pre_start,
            },
        )
        server.add_generic_rpc_handlers((handler,))
        if not self.plugin_dir.is_dir():
            raise ShareError(f"no kubelet device-plugin directory {self.plugin_dir}")
        try:
            server.add_insecure_port(f"unix://{self.endpoint}")
        except RuntimeError:
            raise ShareError(f"cannot serve the device plugin on {self.endpoint}") from None
        server.start()
        self._server = server
        self.register()

    def register(self) -> None:
        kubelet = self.plugin_dir / api.KUBELET_SOCKET
        request = api.message("RegisterRequest")(
            version=api.API_VERSION,
            endpoint=PLUGIN_SOCKET,
            resource_name=self.resource,
            options=api.message("DevicePluginOptions")(get_preferred_allocation_available=True),
        )
        with self._grpc.insecure_channel(f"unix://{kubelet}") as channel:
            try:
                api.stub(channel, "Registration")["Register"](request, timeout=10)
            except self._grpc.RpcError as err:
                raise ShareError(
                    f"the kubelet at {kubelet} refused the device plugin: {err.details()}"
                ) from None
        self._kubelet_id = self._socket_id(kubelet)

    @staticmethod
    def _socket_id(path: Path) -> tuple[int, int] | None:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        return (st.st_dev, st.st_ino)

    def stop(self) -> None:
        self._stop.set()
        with self._changed:
            self._changed.notify_all()
        if self._server is not None:
            self._server.stop(grace=1).wait()
            self._server = None

    def serve_forever(self, on_ready: Callable[[], None] | None = None) -> None:
        """Start; restart and re-register whenever the kubelet restarts; until stop().

        A registration that fails after the first (the kubelet is still restarting) is
        retried every ``health_interval_s``, with one line on stderr."""
        self.start()
        if on_ready is not None:
            on_ready()
        registered = True
        while not self._stop.wait(self.health_interval_s):
            with self._changed:
                self._changed.notify_all()  # ListAndWatch re-checks health
            kubelet = self._socket_id(self.plugin_dir / api.KUBELET_SOCKET)
            if kubelet is None:
                continue
            if registered and kubelet == self._kubelet_id and self.endpoint.exists():
                continue
            if self._server is not None:
                self._server.stop(grace=1).wait()
                self._server = None
            try:
                self.start()
                registered = True
            except ShareError as err:
                if registered:
                    print(f"gpumosaic share device-plugin: {err}; retrying", file=sys.stderr)
                registered = False
