"""kube-scheduler's extender wire format (k8s.io/kube-scheduler extender/v1, types.go).

The Go structs carry no JSON tags, so the keys are the capitalised Go field names
(``Pod``, ``Nodes``, ``NodeNames``, ``FailedNodes``, ``Error``, ``Host``, ``Score``, ...);
the embedded Pod and Node objects keep their own camelCase keys. Go decodes keys
case-insensitively but we emit and accept the exact names.

Requests are parsed once (``parse_args``/``parse_binding``): bytes that are not JSON, or
JSON that is not the struct, raise ``WireError`` (HTTP 400 with the message); lists and
names are bounded (``admission``). Pod and Node bodies stay plain dicts here:
``vocabulary`` reads the few fields it needs through admission, which keeps the full-Nodes
mode (1,213 Node objects per call at openb scale) fast.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from gpumosaic.apps.extender.admission import (
    MAX_INT64,
    MAX_NAME_CHARS,
    MAX_NODES,
    MAX_UID_CHARS,
    AdmissionError,
)

# MaxExtenderPriority in extender/v1: prioritize scores are 0..10, and kube-scheduler
# multiplies them by the extender's weight x (MaxNodeScore 100 / 10).
MAX_EXTENDER_PRIORITY = 10


class WireError(AdmissionError):
    """A request body that is not the extender/v1 struct (answered with HTTP 400)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=400)


Name = Annotated[str, StringConstraints(min_length=1, max_length=MAX_NAME_CHARS)]
Uid = Annotated[str, StringConstraints(max_length=MAX_UID_CHARS)]


class NodeList(BaseModel):
    model_config = ConfigDict(extra="allow")

    items: list[dict[str, Any]] = Field(default_factory=list, max_length=MAX_NODES)


class ExtenderArgs(BaseModel):
    """Body of filter and prioritize. ``NodeNames`` is set iff nodeCacheCapable,
    ``Nodes`` otherwise; the other one is null."""

    model_config = ConfigDict(extra="ignore")

    Pod: dict[str, Any]
    Nodes: NodeList | None = None
    NodeNames: list[Name] | None = Field(default=None, max_length=MAX_NODES)

    @property
    def node_cache_capable(self) -> bool:
        return self.NodeNames is not None

    def node_names(self) -> list[str]:
        if self.NodeNames is not None:
            return self.NodeNames
        return self.node_object_names()

    def node_object_names(self) -> list[str]:
        """The names of the Node objects; WireError if one has none."""
        if self.Nodes is None:
            return []
        names = []
        for i, item in enumerate(self.Nodes.items):
            meta = item.get("metadata")
            name = meta.get("name") if isinstance(meta, dict) else None
            if not isinstance(name, str) or not name:
                raise WireError(f"Nodes.items[{i}].metadata.name is missing")
            if len(name) > MAX_NAME_CHARS:
                raise WireError(f"Nodes.items[{i}].metadata.name is too long")
            names.append(name)
        return names


class ExtenderBindingArgs(BaseModel):
    model_config = ConfigDict(extra="ignore")

    PodName: Name
    PodNamespace: Name
    PodUID: Uid
    Node: Name


def _load(body: bytes) -> Any:
    # orjson: the full-Nodes mode carries ~0.6 MB of Node objects per call at openb scale,
    # and the stdlib takes twice as long to read it and 15x as long to write it (measured).
    try:
        value = orjson.loads(body)
    except (orjson.JSONDecodeError, UnicodeDecodeError, ValueError, RecursionError) as err:
        raise WireError(f"the body is not JSON: {type(err).__name__}: {err}") from None
    # Every integer, read or ignored, fits an int64 (docs/kubernetes.md): a cheap scan of
    # the bytes for 19+ digits, then a walk of the value only when one is there.
    if _LONG_NUMBER.search(body) and _over_int64(value):
        raise WireError(f"an integer in the body is beyond int64 (at most {MAX_INT64})")
    return value


_LONG_NUMBER = re.compile(rb"[0-9]{19}")


def _over_int64(value: Any) -> bool:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, float):
            # orjson reads an integer below int64's range as a float (rounded to -2^63)
            if abs(v) > MAX_INT64:
                return True
        elif isinstance(v, int) and not isinstance(v, bool):
            if not -MAX_INT64 - 1 <= v <= MAX_INT64:
                return True
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return False


def _explain(err: ValidationError, struct: str) -> WireError:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or struct
    return WireError(f"{struct}: {where}: {first['msg']}")


def parse_args(body: bytes) -> ExtenderArgs:
    """Parse an ExtenderArgs body; at least one of Nodes / NodeNames must be given."""
    try:
        args = ExtenderArgs.model_validate(_load(body))
    except ValidationError as err:
        raise _explain(err, "ExtenderArgs") from None
    if args.Nodes is None and args.NodeNames is None:
        raise WireError("ExtenderArgs: one of Nodes or NodeNames must be set")
    args.node_object_names()  # every Node object must have a name
    return args


def parse_binding(body: bytes) -> ExtenderBindingArgs:
    try:
        return ExtenderBindingArgs.model_validate(_load(body))
    except ValidationError as err:
        raise _explain(err, "ExtenderBindingArgs") from None


def filter_result(
    args: ExtenderArgs,
    passed: list[str],
    failed: dict[str, str],
    unresolvable: dict[str, str],
    error: str = "",
) -> dict[str, Any]:
    """ExtenderFilterResult in the same mode as the request: NodeNames for a
    nodeCacheCapable request, the passing Node objects (unchanged) otherwise."""
    nodes: dict[str, Any] | None = None
    names: list[str] | None = None
    if args.node_cache_capable:
        names = passed
    else:
        keep = set(passed)
        items = args.Nodes.items if args.Nodes is not None else []
        nodes = {
            "metadata": {},
            "items": [n for n in items if n.get("metadata", {}).get("name") in keep],
        }
    return {
        "Nodes": nodes,
        "NodeNames": names,
        "FailedNodes": failed,
        "FailedAndUnresolvableNodes": unresolvable,
        "Error": error,
    }


def error_filter_result(error: str) -> dict[str, Any]:
    """A filter answer that fails the pod with ``error`` (kube-scheduler reports it)."""
    return {
        "Nodes": None,
        "NodeNames": None,
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {},
        "Error": error,
    }


def host_priority_list(hosts: list[str], scores: list[int]) -> list[dict[str, Any]]:
    """HostPriorityList: a bare array of ``{"Host", "Score"}``; scores must be 0..10."""
    if any(not 0 <= s <= MAX_EXTENDER_PRIORITY for s in scores):
        raise ValueError(f"extender scores must be 0..{MAX_EXTENDER_PRIORITY}")
    return [{"Host": h, "Score": s} for h, s in zip(hosts, scores, strict=True)]


def binding_result(error: str = "") -> dict[str, str]:
    return {"Error": error}


def encode(body: Any) -> bytes:
    """JSON bytes of an answer."""
    return orjson.dumps(body)
