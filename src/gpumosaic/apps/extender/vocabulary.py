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

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from gpumosaic.apps.extender.admission import (
    MAX_ANNOTATION_CHARS,
    MAX_CONTAINERS,
    MAX_GPU_COUNT,
    MAX_INT64,
    MAX_NAME_CHARS,
    MAX_UID_CHARS,
    AdmissionError,
    array,
    count,
    gpu_indices,
    mapping,
    scaled,
    text,
)
from gpumosaic.model.cluster import NodeSpec
from gpumosaic.model.gpu import MILLI_PER_GPU, GpuModel, UnknownGpuModelError, gpu_model
from gpumosaic.model.job import JobSpec

PREFIX = "alibabacloud.com/"
GPU_MILLI = PREFIX + "gpu-milli"
GPU_COUNT = PREFIX + "gpu-count"
GPU_CARD_MODEL = PREFIX + "gpu-card-model"
GPU_INDEX = PREFIX + "gpu-index"
ASSUME_TIME = PREFIX + "assume-time"
MIB = Decimal(1 << 20)
MILLI = Decimal("0.001")
# Phases of a pod that holds nothing any more.
FINISHED_PHASES = frozenset({"Succeeded", "Failed"})


# A pod or node that cannot be read: admission's error (HTTP 422), named for this module.
PodError = AdmissionError


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


def pod_request(pod: Any) -> PodRequest:
    """The request of a pod given as API JSON; ``PodError`` names what is wrong. Every
    value passes admission: bounded names, ASCII integers in range, quantities by the API's
    grammar."""
    if not isinstance(pod, Mapping):
        raise PodError("Pod must be an object")
    meta = mapping(pod.get("metadata"), "Pod.metadata")
    name = text(meta.get("name"), "Pod.metadata.name", MAX_NAME_CHARS, required=True)
    namespace = text(meta.get("namespace"), "Pod.metadata.namespace", MAX_NAME_CHARS)
    namespace = namespace or "default"
    uid = text(meta.get("uid"), "Pod.metadata.uid", MAX_UID_CHARS)
    label = f"{namespace}/{name}"
    annotations = mapping(meta.get("annotations"), f"pod {label}: metadata.annotations")
    raw_milli, raw_count = annotations.get(GPU_MILLI), annotations.get(GPU_COUNT)
    where = f"pod {label}: annotation "
    milli = None if raw_milli is None else count(raw_milli, where + GPU_MILLI, MILLI_PER_GPU)
    number = None if raw_count is None else count(raw_count, where + GPU_COUNT, MAX_GPU_COUNT)
    if number is None:
        number = 1 if milli else 0
    if milli is None:
        milli = MILLI_PER_GPU if number else 0
    if number and milli == 0:
        raise PodError(f"pod {label}: {GPU_COUNT}={number} with {GPU_MILLI}=0")
    if number > 1 and milli < MILLI_PER_GPU:
        raise PodError(
            f"pod {label}: {GPU_MILLI}={milli} below {MILLI_PER_GPU} is only allowed with "
            f"{GPU_COUNT}=1 (got {number}): a share of several GPUs is not supported"
        )
    models = text(annotations.get(GPU_CARD_MODEL), where + GPU_CARD_MODEL, MAX_ANNOTATION_CHARS)
    allowed: frozenset[str] | None = None
    if models.strip():
        allowed = frozenset(m.strip().upper() for m in models.split("|") if m.strip())
    cpu, memory = pod_cpu_memory(pod, label)
    return PodRequest(
        key=uid or label,
        namespace=namespace,
        name=name,
        uid=uid,
        num_gpu=number,
        gpu_milli=milli if number else 0,
        allowed_models=allowed if number else None,
        cpu_milli=cpu,
        memory_mib=memory,
    )


def _requests(container: Any, where: str) -> tuple[int, int]:
    container = mapping(container, where)
    resources = mapping(container.get("resources"), f"{where}.resources")
    requests = mapping(resources.get("requests"), f"{where}.resources.requests")
    cpu = requests.get("cpu")
    memory = requests.get("memory")
    cpu_milli = 0 if cpu is None else scaled(cpu, f"{where} cpu", MILLI, up=True)
    memory_mib = 0 if memory is None else scaled(memory, f"{where} memory", MIB, up=True)
    return cpu_milli, memory_mib


def pod_cpu_memory(pod: Mapping[str, Any], label: str) -> tuple[int, int]:
    """kube-scheduler's effective request: max(sum of containers, max of init containers)
    plus the pod overhead."""
    spec = mapping(pod.get("spec"), f"pod {label}: spec")
    containers = array(spec.get("containers"), f"pod {label}: spec.containers", MAX_CONTAINERS)
    inits = array(spec.get("initContainers"), f"pod {label}: spec.initContainers", MAX_CONTAINERS)
    if len(containers) + len(inits) > MAX_CONTAINERS:  # the documented limit is on both
        raise PodError(
            f"pod {label}: {len(containers)} containers + {len(inits)} init containers, "
            f"over {MAX_CONTAINERS} in all"
        )
    cpu = memory = 0
    for i, c in enumerate(containers):
        dc, dm = _requests(c, f"pod {label}: containers[{i}]")
        cpu, memory = cpu + dc, memory + dm
    for i, c in enumerate(inits):
        dc, dm = _requests(c, f"pod {label}: initContainers[{i}]")
        cpu, memory = max(cpu, dc), max(memory, dm)
    overhead = mapping(spec.get("overhead"), f"pod {label}: spec.overhead")
    if overhead:
        dc, dm = _requests({"resources": {"requests": overhead}}, f"pod {label}: overhead")
        cpu, memory = cpu + dc, memory + dm
    if cpu > MAX_INT64 or memory > MAX_INT64:  # a thousand containers at the maximum each
        raise PodError(f"pod {label}: the requests add up beyond int64")
    return cpu, memory


def gpu_index_annotation(gpus: tuple[int, ...]) -> str:
    return "-".join(str(g) for g in gpus)


def bound_pod(pod: Mapping[str, Any]) -> BoundPod | None:
    """The share a pod holds, from ``spec.nodeName`` and its annotations; None when it
    holds nothing (not bound, or finished). Raises PodError for unreadable annotations."""
    spec = mapping(pod.get("spec"), "Pod.spec")
    status = mapping(pod.get("status"), "Pod.status")
    node = text(spec.get("nodeName"), "Pod.spec.nodeName", MAX_NAME_CHARS)
    if not node or status.get("phase") in FINISHED_PHASES:
        return None
    request = pod_request(pod)
    if request.num_gpu == 0:
        return BoundPod(request, node, ())
    meta = mapping(pod.get("metadata"), "Pod.metadata")
    raw = mapping(meta.get("annotations"), "Pod.metadata.annotations").get(GPU_INDEX)
    if raw is None:
        return BoundPod(request, node, None)
    gpus = gpu_indices(raw, f"pod {request.label}: annotation {GPU_INDEX}")
    if len(gpus) != request.num_gpu:
        raise PodError(
            f"pod {request.label}: {GPU_INDEX}={raw!r} names {len(gpus)} GPUs, "
            f"{GPU_COUNT} asks for {request.num_gpu}"
        )
    return BoundPod(request, node, gpus)


@dataclass(frozen=True, slots=True)
class NodeReading:
    """A node of the API as gpumosaic sees it; ``unknown_model`` is True when the card
    model has no power profile (PWR then counts its GPUs at 0 W)."""

    spec: NodeSpec
    unknown_model: bool


def unknown_model(name: str) -> GpuModel:
    """A model without a profile: usable for filtering, 0 W for PWR (counted in /state)."""
    return GpuModel(name.upper(), 0, 0.0, 0.0)


def node_reading(node: Any) -> NodeReading:
    """A Node object of the API -> NodeSpec (allocatable first, capacity as fallback)."""
    node = mapping(node, "Node")
    meta = mapping(node.get("metadata"), "Node.metadata")
    name = text(meta.get("name"), "Node.metadata.name", MAX_NAME_CHARS, required=True)
    status = mapping(node.get("status"), f"node {name}: status")
    capacity = {
        **mapping(status.get("capacity"), f"node {name}: capacity"),
        **mapping(status.get("allocatable"), f"node {name}: allocatable"),
    }
    where = f"node {name}: "
    if capacity.get(GPU_COUNT) is not None:
        gpus = scaled(capacity[GPU_COUNT], where + GPU_COUNT, Decimal(1), up=False)
    elif capacity.get(GPU_MILLI) is not None:
        gpus = scaled(capacity[GPU_MILLI], where + GPU_MILLI, Decimal(MILLI_PER_GPU), up=False)
    else:
        gpus = 0
    if gpus > MAX_GPU_COUNT:
        raise PodError(f"node {name}: {gpus} GPUs is over {MAX_GPU_COUNT}")
    labels = mapping(meta.get("labels"), f"node {name}: labels")
    model_name = text(labels.get(GPU_CARD_MODEL), where + GPU_CARD_MODEL, MAX_NAME_CHARS)
    model_name = model_name.strip()
    if gpus and not model_name:
        raise PodError(f"node {name}: {gpus} GPUs but no label {GPU_CARD_MODEL}")
    missing = False
    try:
        model = gpu_model(model_name) if model_name else unknown_model("NONE")
    except UnknownGpuModelError:
        model, missing = unknown_model(model_name), True
    cpu = scaled(capacity.get("cpu", 0), where + "cpu", MILLI, up=False)
    memory = scaled(capacity.get("memory", 0), where + "memory", MIB, up=False)
    return NodeReading(NodeSpec(name, model, gpus, cpu, memory), missing)


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
