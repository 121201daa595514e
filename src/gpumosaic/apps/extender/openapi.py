"""The verbs' request bodies and answers as OpenAPI schemas, for /docs and for the
property-based tests generated from /openapi.json.

The routes read their bodies themselves (size-bounded while streaming, then ``wire`` and
``admission``), so FastAPI cannot infer these schemas: they are written here from the Go
types of k8s.io/kube-scheduler extender/v1 and the Pod fields the vocabulary reads. The
bounds are admission's, so a body valid by this schema is one the extender accepts.
"""

from __future__ import annotations

from typing import Any

from gpumosaic.apps.extender.admission import (
    MAX_ANNOTATION_CHARS,
    MAX_CONTAINERS,
    MAX_NAME_CHARS,
    MAX_NODES,
    MAX_QUANTITY_CHARS,
    MAX_UID_CHARS,
)
from gpumosaic.apps.extender.vocabulary import GPU_CARD_MODEL, GPU_COUNT, GPU_MILLI

NAME: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": MAX_NAME_CHARS}


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """An optional field: null means absent, as for Go's decoder and ``admission``."""
    kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    return {**schema, "type": [*kinds, "null"]}


QUANTITY: dict[str, Any] = {
    "type": ["string", "integer", "null"],
    "maxLength": MAX_QUANTITY_CHARS,
    "pattern": r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([KMGTPE]i|[mkMGTPE]|[eE][+-]?[0-9]{1,3})?$",
    "examples": ["500m", "2", "16Gi"],
}
REQUESTS: dict[str, Any] = {
    "type": ["object", "null"],
    "properties": {"cpu": QUANTITY, "memory": QUANTITY},
}
CONTAINER: dict[str, Any] = {
    "type": ["object", "null"],
    "properties": {"resources": {"type": ["object", "null"], "properties": {"requests": REQUESTS}}},
}
COUNT: dict[str, Any] = {"type": ["string", "null"], "pattern": "^[ \t]*[0-9]{1,19}[ \t]*$"}
POD: dict[str, Any] = {
    "type": "object",
    "required": ["metadata"],
    "properties": {
        "metadata": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": NAME,
                "namespace": {"type": ["string", "null"], "maxLength": MAX_NAME_CHARS},
                "uid": {"type": ["string", "null"], "maxLength": MAX_UID_CHARS},
                "annotations": {
                    "type": ["object", "null"],
                    "properties": {
                        GPU_MILLI: COUNT,
                        GPU_COUNT: COUNT,
                        GPU_CARD_MODEL: {
                            "type": ["string", "null"],
                            "maxLength": MAX_ANNOTATION_CHARS,
                        },
                    },
                },
            },
        },
        "spec": {
            "type": ["object", "null"],
            "properties": {
                "containers": nullable(
                    {"type": "array", "items": CONTAINER, "maxItems": MAX_CONTAINERS}
                ),
                "initContainers": {
                    "type": ["array", "null"],
                    "items": CONTAINER,
                    "maxItems": MAX_CONTAINERS,
                },
                "overhead": REQUESTS,
            },
        },
    },
}
# Of a Node object only the name is read: the extender's nodes come from the API server.
NODE: dict[str, Any] = {
    "type": "object",
    "required": ["metadata"],
    "properties": {
        "metadata": {"type": "object", "required": ["name"], "properties": {"name": NAME}}
    },
}
EXTENDER_ARGS: dict[str, Any] = {
    "type": "object",
    "required": ["Pod"],
    "properties": {
        "Pod": POD,
        "Nodes": {
            "type": ["object", "null"],
            "properties": {"items": {"type": "array", "items": NODE, "maxItems": MAX_NODES}},
        },
        "NodeNames": {"type": ["array", "null"], "items": NAME, "maxItems": MAX_NODES},
    },
}
BINDING_ARGS: dict[str, Any] = {
    "type": "object",
    "required": ["PodName", "PodNamespace", "PodUID", "Node"],
    "properties": {
        "PodName": NAME,
        "PodNamespace": NAME,
        "PodUID": {"type": "string", "maxLength": MAX_UID_CHARS},
        "Node": NAME,
    },
}
ERROR: dict[str, Any] = {"type": "object", "properties": {"Error": {"type": "string"}}}
FILTER_RESULT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "Nodes": {"type": ["object", "null"]},
        "NodeNames": {"type": ["array", "null"], "items": {"type": "string"}},
        "FailedNodes": {"type": "object"},
        "FailedAndUnresolvableNodes": {"type": "object"},
        "Error": {"type": "string"},
    },
}
HOST_PRIORITY_LIST: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "Host": {"type": "string"},
            "Score": {"type": "integer", "minimum": 0, "maximum": 10},
        },
    },
}
_VERBS = {
    "filter": (EXTENDER_ARGS, FILTER_RESULT, FILTER_RESULT),
    "prioritize": (EXTENDER_ARGS, HOST_PRIORITY_LIST, ERROR),
    "bind": (BINDING_ARGS, ERROR, ERROR),
}


def _content(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


def describe_verbs(verb: str) -> dict[str, Any]:
    """``openapi_extra`` of a verb's route: its request body and answers."""
    body, answer, refusal = _VERBS[verb]
    return {
        "requestBody": {"required": True, **_content(body)},
        "responses": {
            "200": {
                "description": "the answer (Error set for a logical failure)",
                **_content(answer),
            },
            "400": {"description": "not JSON, or not the extender/v1 struct", **_content(refusal)},
            "413": {"description": "the body is over the limit", **_content(refusal)},
            "422": {"description": "a value out of its rules", **_content(refusal)},
            "503": {"description": "the state cannot be written", **_content(refusal)},
        },
    }
