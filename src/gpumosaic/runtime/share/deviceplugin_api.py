"""The kubelet device-plugin API (``v1beta1``), built at run time with protobuf and grpcio.

The messages and services are those of ``k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1``
(package ``v1beta1``, the same message names, field names and numbers, so the bytes on the
wire are the kubelet's); they are declared here as a descriptor instead of generated code,
so no protoc step is needed. Needs the ``share-k8s`` extra (grpcio).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from gpumosaic.runtime.share.native import ShareError

API_VERSION = "v1beta1"
PACKAGE = "v1beta1"
KUBELET_SOCKET = "kubelet.sock"
DEVICE_PLUGIN_PATH = "/var/lib/kubelet/device-plugins"
HEALTHY, UNHEALTHY = "Healthy", "Unhealthy"

_F = descriptor_pb2.FieldDescriptorProto
_STRING, _BOOL, _INT32, _INT64, _MESSAGE = (
    _F.TYPE_STRING,
    _F.TYPE_BOOL,
    _F.TYPE_INT32,
    _F.TYPE_INT64,
    _F.TYPE_MESSAGE,
)
_ONE, _MANY = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED

# name -> [(field, number, type, label, message type or None)]
_MESSAGES: dict[str, list[tuple[str, int, int, int, str | None]]] = {
    "DevicePluginOptions": [
        ("pre_start_required", 1, _BOOL, _ONE, None),
        ("get_preferred_allocation_available", 2, _BOOL, _ONE, None),
    ],
    "RegisterRequest": [
        ("version", 1, _STRING, _ONE, None),
        ("endpoint", 2, _STRING, _ONE, None),
        ("resource_name", 3, _STRING, _ONE, None),
        ("options", 4, _MESSAGE, _ONE, "DevicePluginOptions"),
    ],
    "Empty": [],
    "ListAndWatchResponse": [("devices", 1, _MESSAGE, _MANY, "Device")],
    "TopologyInfo": [("nodes", 1, _MESSAGE, _MANY, "NUMANode")],
    "NUMANode": [("ID", 1, _INT64, _ONE, None)],
    "Device": [
        ("ID", 1, _STRING, _ONE, None),
        ("health", 2, _STRING, _ONE, None),
        ("topology", 3, _MESSAGE, _ONE, "TopologyInfo"),
    ],
    "PreStartContainerRequest": [("devices_ids", 1, _STRING, _MANY, None)],
    "PreStartContainerResponse": [],
    "PreferredAllocationRequest": [
        ("container_requests", 1, _MESSAGE, _MANY, "ContainerPreferredAllocationRequest")
    ],
    "ContainerPreferredAllocationRequest": [
        ("available_deviceIDs", 1, _STRING, _MANY, None),
        ("must_include_deviceIDs", 2, _STRING, _MANY, None),
        ("allocation_size", 3, _INT32, _ONE, None),
    ],
    "PreferredAllocationResponse": [
        ("container_responses", 1, _MESSAGE, _MANY, "ContainerPreferredAllocationResponse")
    ],
    "ContainerPreferredAllocationResponse": [("deviceIDs", 1, _STRING, _MANY, None)],
    "AllocateRequest": [("container_requests", 1, _MESSAGE, _MANY, "ContainerAllocateRequest")],
    "ContainerAllocateRequest": [("devices_ids", 1, _STRING, _MANY, None)],
    "AllocateResponse": [("container_responses", 1, _MESSAGE, _MANY, "ContainerAllocateResponse")],
    "ContainerAllocateResponse": [
        ("envs", 1, _MESSAGE, _MANY, "ContainerAllocateResponse.EnvsEntry"),
        ("mounts", 2, _MESSAGE, _MANY, "Mount"),
        ("devices", 3, _MESSAGE, _MANY, "DeviceSpec"),
        ("annotations", 4, _MESSAGE, _MANY, "ContainerAllocateResponse.AnnotationsEntry"),
        ("cdi_devices", 5, _MESSAGE, _MANY, "CDIDevice"),
    ],
    "Mount": [
        ("container_path", 1, _STRING, _ONE, None),
        ("host_path", 2, _STRING, _ONE, None),
        ("read_only", 3, _BOOL, _ONE, None),
    ],
    "DeviceSpec": [
        ("container_path", 1, _STRING, _ONE, None),
        ("host_path", 2, _STRING, _ONE, None),
        ("permissions", 3, _STRING, _ONE, None),
    ],
    "CDIDevice": [("name", 1, _STRING, _ONE, None)],
}
_MAPS = {"ContainerAllocateResponse": ("EnvsEntry", "AnnotationsEntry")}

# service -> [(method, request, response, server streaming)]
SERVICES: dict[str, list[tuple[str, str, str, bool]]] = {
    "Registration": [("Register", "RegisterRequest", "Empty", False)],
    "DevicePlugin": [
        ("GetDevicePluginOptions", "Empty", "DevicePluginOptions", False),
        ("ListAndWatch", "Empty", "ListAndWatchResponse", True),
        (
            "GetPreferredAllocation",
            "PreferredAllocationRequest",
            "PreferredAllocationResponse",
            False,
        ),
        ("Allocate", "AllocateRequest", "AllocateResponse", False),
        ("PreStartContainer", "PreStartContainerRequest", "PreStartContainerResponse", False),
    ],
}


def _field(
    name: str, number: int, kind: int, label: int, type_name: str | None
) -> descriptor_pb2.FieldDescriptorProto:
    field = descriptor_pb2.FieldDescriptorProto(name=name, number=number, type=kind, label=label)
    if type_name is not None:
        field.type_name = f".{PACKAGE}.{type_name}"
    return field


def _file() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(
        name="gpumosaic/deviceplugin/v1beta1/api.proto", package=PACKAGE, syntax="proto3"
    )
    for name, fields in _MESSAGES.items():
        msg = proto.message_type.add(name=name)
        msg.field.extend(_field(*f) for f in fields)
        for entry in _MAPS.get(name, ()):
            nested = msg.nested_type.add(name=entry)
            nested.field.extend(
                [_field("key", 1, _STRING, _ONE, None), _field("value", 2, _STRING, _ONE, None)]
            )
            nested.options.map_entry = True
    for service, methods in SERVICES.items():
        svc = proto.service.add(name=service)
        for method, request, response, streaming in methods:
            svc.method.add(
                name=method,
                input_type=f".{PACKAGE}.{request}",
                output_type=f".{PACKAGE}.{response}",
                server_streaming=streaming,
            )
    return proto


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file())


def message(name: str) -> Any:
    """The message class ``v1beta1.<name>``."""
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{PACKAGE}.{name}"))


def grpc_module() -> Any:
    try:
        import grpc
    except ImportError:
        raise ShareError(
            "the kubelet device plugin needs grpcio: pip install 'gpumosaic[share-k8s]'"
        ) from None
    return grpc


def method_path(service: str, method: str) -> str:
    return f"/{PACKAGE}.{service}/{method}"


def service_handler(service: str, impl: dict[str, Callable[..., Any]]) -> Any:
    """A grpc generic handler serving ``impl[method](request, context)`` for ``service``."""
    grpc = grpc_module()
    handlers = {}
    for method, request, response, streaming in SERVICES[service]:
        make = (
            grpc.unary_stream_rpc_method_handler
            if streaming
            else grpc.unary_unary_rpc_method_handler
        )
        handlers[method] = make(
            impl[method],
            request_deserializer=message(request).FromString,
            response_serializer=message(response).SerializeToString,
        )
    return grpc.method_handlers_generic_handler(f"{PACKAGE}.{service}", handlers)


def stub(channel: Any, service: str) -> dict[str, Callable[..., Any]]:
    """Client callables for every method of ``service`` on ``channel``."""
    calls = {}
    for method, request, response, streaming in SERVICES[service]:
        factory = channel.unary_stream if streaming else channel.unary_unary
        calls[method] = factory(
            method_path(service, method),
            request_serializer=message(request).SerializeToString,
            response_deserializer=message(response).FromString,
        )
    return calls
