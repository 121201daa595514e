"""The GPU-sharing vocabulary of the FGD simulator (``alibabacloud.com/*``) and the
mapping of Kubernetes pods and nodes to gpumosaic's JobSpec and NodeSpec.

Pods ask through annotations: ``gpu-milli`` (per GPU, 0..1000), ``gpu-count`` and
``gpu-card-model`` (allowed models joined by ``|``). Nodes declare ``gpu-count`` /
``gpu-milli`` in ``status.allocatable`` (or ``capacity``) and the model in the label
``gpu-card-model``. At bind the extender writes ``gpu-index`` (``-``-joined slots) and
``assume-time`` (ns since the epoch) on the pod; a bound pod's share is rebuilt from them.

CPU and memory come from the pod's resource requests the way kube-scheduler counts them:
max(sum over containers, largest init container) plus ``spec.overhead``; CPU in milli
(rounded up), memory in MiB (rounded up).

Pods and nodes are read as the plain JSON dicts of the API (camelCase keys), the shape
both the extender's wire and the ``kubernetes`` client's serializer give.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any

from gpumosaic.model.cluster import NodeSpec
from gpumosaic.model.gpu import MILLI_PER_GPU, GpuModel, UnknownGpuModelError, gpu_model
from gpumosaic.model.job import JobSpec

PREFIX = "alibabacloud.com/"
GPU_MILLI = PREFIX + "gpu-milli"
GPU_COUNT = PREFIX + "gpu-count"
GPU_CARD_MODEL = PREFIX + "gpu-card-model"
GPU_INDEX = PREFIX + "gpu-index"
ASSUME_TIME = PREFIX + "assume-time"
MIB = 1 << 20
# Phases of a pod that holds nothing any more.
FINISHED_PHASES = frozenset({"Succeeded", "Failed"})


class PodError(ValueError):
    """A pod whose request cannot be understood; the message names the pod and the field."""


@dataclass(frozen=True, slots=True)
class PodRequest:
    """What one pod asks for, in gpumosaic's units."""

    key: str  # the pod's UID, or namespace/name when it has none
    namespace: str
    name: str
    uid: str
    num_gpu: int
    gpu_milli: int  # per GPU; 0 for a CPU-only pod
    allowed_models: frozenset[str] | None
    cpu_milli: int
    memory_mib: int

    @property
    def label(self) -> str:
        return f"{self.namespace}/{self.name}"

    def job(self, job_id: int) -> JobSpec:
        return JobSpec(
            id=job_id,
            arrival_s=0.0,
            job_type="pod",
            num_gpu=self.num_gpu,
            gpu_milli=self.gpu_milli,
            work=0.0,
            cpu_milli=self.cpu_milli,
            memory_mib=self.memory_mib,
            allowed_models=self.allowed_models,
            name=self.label,
        )


@dataclass(frozen=True, slots=True)
class BoundPod:
    """A pod that holds resources on a node: its request and the GPU slots it was given
    (``gpus`` is None when a GPU pod carries no ``gpu-index``: bound by someone else)."""

    request: PodRequest
    node: str
    gpus: tuple[int, ...] | None


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise PodError(f"{where} must be an object")
    return value


def _int_annotation(annotations: Mapping[str, Any], name: str, label: str) -> int | None:
    raw = annotations.get(name)
    if raw is None:
        return None
    text = str(raw).strip()
    if not text.isdigit():  # rejects signs, decimals, exponents and empty strings
        raise PodError(f"pod {label}: annotation {name}={raw!r} is not a non-negative integer")
    return int(text)


def pod_request(pod: Mapping[str, Any]) -> PodRequest:
    """The request of a pod given as API JSON; ``PodError`` names what is wrong."""
    if not isinstance(pod, Mapping):
        raise PodError("Pod must be an object")
    meta = _mapping(pod.get("metadata"), "Pod.metadata")
    name = str(meta.get("name") or "")
    namespace = str(meta.get("namespace") or "default")
    uid = str(meta.get("uid") or "")
    if not name:
        raise PodError("Pod.metadata.name is missing")
    label = f"{namespace}/{name}"
    annotations = _mapping(meta.get("annotations"), f"pod {label}: metadata.annotations")
    milli = _int_annotation(annotations, GPU_MILLI, label)
    count = _int_annotation(annotations, GPU_COUNT, label)
    if milli is not None and milli > MILLI_PER_GPU:
        raise PodError(f"pod {label}: annotation {GPU_MILLI}={milli} is over {MILLI_PER_GPU}")
    if count is None:
        count = 1 if milli else 0
    if milli is None:
        milli = MILLI_PER_GPU if count else 0
    if count and milli == 0:
        raise PodError(f"pod {label}: {GPU_COUNT}={count} with {GPU_MILLI}=0")
    if count > 1 and milli < MILLI_PER_GPU:
        raise PodError(
            f"pod {label}: {GPU_MILLI}={milli} below {MILLI_PER_GPU} is only allowed with "
            f"{GPU_COUNT}=1 (got {count}): a share of several GPUs is not supported"
        )
    models = annotations.get(GPU_CARD_MODEL)
    allowed: frozenset[str] | None = None
    if models is not None and str(models).strip():
        allowed = frozenset(m.strip().upper() for m in str(models).split("|") if m.strip())
    cpu, memory = pod_cpu_memory(pod, label)
    return PodRequest(
        key=uid or label,
        namespace=namespace,
        name=name,
        uid=uid,
        num_gpu=count,
        gpu_milli=milli if count else 0,
        allowed_models=allowed if count else None,
        cpu_milli=cpu,
        memory_mib=memory,
    )


@lru_cache(maxsize=4096)
def _quantity(text: str) -> Decimal:
    from kubernetes.utils.quantity import parse_quantity

    return Decimal(parse_quantity(text))


def quantity(value: Any, where: str) -> Decimal:
    """A Kubernetes quantity (``500m``, ``16Gi``, ``2``) as a Decimal; PodError if not."""
    try:
        result = _quantity(str(value).strip())
    except (ValueError, InvalidOperation, TypeError):
        raise PodError(f"{where}={value!r} is not a Kubernetes quantity") from None
    if result < 0 or not result.is_finite():
        raise PodError(f"{where}={value!r} must be a finite quantity >= 0")
    return result


def _requests(container: Any, where: str) -> tuple[int, int]:
    container = _mapping(container, where)
    resources = _mapping(container.get("resources"), f"{where}.resources")
    requests = _mapping(resources.get("requests"), f"{where}.resources.requests")
    cpu = requests.get("cpu")
    memory = requests.get("memory")
    cpu_milli = 0 if cpu is None else math.ceil(quantity(cpu, f"{where} cpu") * 1000)
    memory_mib = 0 if memory is None else math.ceil(quantity(memory, f"{where} memory") / MIB)
    return cpu_milli, memory_mib


def pod_cpu_memory(pod: Mapping[str, Any], label: str) -> tuple[int, int]:
    """kube-scheduler's effective request: max(sum of containers, max of init containers)
    plus the pod overhead."""
    spec = _mapping(pod.get("spec"), f"pod {label}: spec")
    containers = spec.get("containers") or []
    inits = spec.get("initContainers") or []
    if not isinstance(containers, list) or not isinstance(inits, list):
        raise PodError(f"pod {label}: spec.containers must be a list")
    cpu = memory = 0
    for i, c in enumerate(containers):
        dc, dm = _requests(c, f"pod {label}: containers[{i}]")
        cpu, memory = cpu + dc, memory + dm
    for i, c in enumerate(inits):
        dc, dm = _requests(c, f"pod {label}: initContainers[{i}]")
        cpu, memory = max(cpu, dc), max(memory, dm)
    overhead = _mapping(spec.get("overhead"), f"pod {label}: spec.overhead")
    if overhead:
        dc, dm = _requests({"resources": {"requests": overhead}}, f"pod {label}: overhead")
        cpu, memory = cpu + dc, memory + dm
    return cpu, memory


def gpu_index_annotation(gpus: tuple[int, ...]) -> str:
    return "-".join(str(g) for g in gpus)


def bound_pod(pod: Mapping[str, Any]) -> BoundPod | None:
    """The share a pod holds, from ``spec.nodeName`` and its annotations; None when it
    holds nothing (not bound, or finished). Raises PodError for unreadable annotations."""
    spec = _mapping(pod.get("spec"), "Pod.spec")
    node = spec.get("nodeName")
    status = _mapping(pod.get("status"), "Pod.status")
    if not node or status.get("phase") in FINISHED_PHASES:
        return None
    request = pod_request(pod)
    if request.num_gpu == 0:
        return BoundPod(request, str(node), ())
    meta = _mapping(pod.get("metadata"), "Pod.metadata")
    raw = _mapping(meta.get("annotations"), "Pod.metadata.annotations").get(GPU_INDEX)
    if raw is None:
        return BoundPod(request, str(node), None)
    parts = str(raw).split("-")
    if not all(p.strip().isdigit() for p in parts):
        raise PodError(f"pod {request.label}: annotation {GPU_INDEX}={raw!r} is not like 0-1-2")
    gpus = tuple(int(p) for p in parts)
    if len(gpus) != request.num_gpu:
        raise PodError(
            f"pod {request.label}: {GPU_INDEX}={raw!r} names {len(gpus)} GPUs, "
            f"{GPU_COUNT} asks for {request.num_gpu}"
        )
    return BoundPod(request, str(node), gpus)


@dataclass(frozen=True, slots=True)
class NodeReading:
    """A node of the API as gpumosaic sees it; ``unknown_model`` is True when the card
    model has no power profile (PWR then counts its GPUs at 0 W)."""

    spec: NodeSpec
    unknown_model: bool


def unknown_model(name: str) -> GpuModel:
    """A model without a profile: usable for filtering, 0 W for PWR (counted in /state)."""
    return GpuModel(name.upper(), 0, 0.0, 0.0)


def node_reading(node: Mapping[str, Any]) -> NodeReading:
    """A Node object of the API -> NodeSpec (allocatable first, capacity as fallback)."""
    meta = _mapping(node.get("metadata"), "Node.metadata")
    name = str(meta.get("name") or "")
    if not name:
        raise PodError("Node.metadata.name is missing")
    status = _mapping(node.get("status"), f"node {name}: status")
    capacity = {
        **_mapping(status.get("capacity"), f"node {name}: capacity"),
        **_mapping(status.get("allocatable"), f"node {name}: allocatable"),
    }
    count_raw = capacity.get(GPU_COUNT)
    if count_raw is None and capacity.get(GPU_MILLI) is not None:
        count_raw = int(quantity(capacity[GPU_MILLI], f"node {name}: {GPU_MILLI}")) // 1000
    count = 0 if count_raw is None else int(quantity(count_raw, f"node {name}: {GPU_COUNT}"))
    labels = _mapping(meta.get("labels"), f"node {name}: labels")
    model_name = str(labels.get(GPU_CARD_MODEL) or "").strip()
    if count and not model_name:
        raise PodError(f"node {name}: {count} GPUs but no label {GPU_CARD_MODEL}")
    missing = False
    try:
        model = gpu_model(model_name) if model_name else unknown_model("NONE")
    except UnknownGpuModelError:
        model, missing = unknown_model(model_name), True
    cpu = math.floor(quantity(capacity.get("cpu", 0), f"node {name}: cpu") * 1000)
    memory = math.floor(quantity(capacity.get("memory", 0), f"node {name}: memory") / MIB)
    return NodeReading(NodeSpec(name, model, count, cpu, memory), missing)


def node_object(spec: NodeSpec) -> dict[str, Any]:
    """The API JSON of a node carrying ``spec`` in this vocabulary (for replays and tests)."""
    resources = {
        "cpu": f"{spec.cpu_milli}m",
        "memory": f"{spec.memory_mib}Mi",
        "pods": "110",
        GPU_COUNT: str(spec.num_gpus),
        GPU_MILLI: str(spec.num_gpus * MILLI_PER_GPU),
    }
    labels = {"kubernetes.io/hostname": spec.name}
    if spec.num_gpus:
        labels[GPU_CARD_MODEL] = spec.gpu.name
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": spec.name, "labels": labels},
        "status": {"capacity": dict(resources), "allocatable": dict(resources)},
    }


def pod_object(job: JobSpec, name: str, namespace: str, uid: str) -> dict[str, Any]:
    """The API JSON of a pod asking for ``job`` in this vocabulary. GPU and CPU-only pods
    alike carry the limit ``alibabacloud.com/gpu-milli`` (total milli, 0 for CPU-only), so
    an extender with ``managedResources`` on it is asked about every one of them."""
    annotations: dict[str, str] = {}
    if job.num_gpu:
        annotations[GPU_MILLI] = str(job.gpu_milli)
        annotations[GPU_COUNT] = str(job.num_gpu)
        if job.allowed_models is not None:
            annotations[GPU_CARD_MODEL] = "|".join(sorted(job.allowed_models))
    requests = {"cpu": f"{job.cpu_milli}m", "memory": f"{job.memory_mib}Mi"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "annotations": annotations,
        },
        "spec": {
            "schedulerName": "gpumosaic",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {
                        "requests": requests,
                        "limits": {GPU_MILLI: str(job.total_gpu_milli)},
                    },
                }
            ],
        },
        "status": {"phase": "Pending"},
    }
