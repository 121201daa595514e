"""Small builders for extender tests: clusters, pods built with the ``kubernetes`` client's
own models and serializer, services on a SQLite file, apps behind TestClient."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from kubernetes import client

from gpumosaic.apps.extender.app import create_app
from gpumosaic.apps.extender.service import ExtenderService
from gpumosaic.apps.extender.sqlite_store import SqliteBackend
from gpumosaic.apps.extender.target import TargetSource
from gpumosaic.apps.extender.vocabulary import GPU_CARD_MODEL, GPU_COUNT, GPU_MILLI
from gpumosaic.model.cluster import ClusterSpec, NodeSpec
from gpumosaic.model.gpu import gpu_model
from gpumosaic.model.job import JobSpec
from gpumosaic.placement.workload import TargetWorkload

_uids = itertools.count(1)
API = client.ApiClient()


def cluster(*nodes: tuple[str, int]) -> ClusterSpec:
    """Nodes n0, n1, ... as (GPU model, GPUs); 64 CPUs and 256 GiB each."""
    return ClusterSpec(
        tuple(
            NodeSpec(f"n{i}", gpu_model(model), gpus, 64_000, 262_144)
            for i, (model, gpus) in enumerate(nodes)
        )
    )


def workload(*shapes: tuple[int, int]) -> TargetWorkload:
    """A target workload of (num_gpu, milli) classes, equally popular."""
    jobs = [
        JobSpec(id=i, arrival_s=0, job_type="t", num_gpu=n, gpu_milli=m, work=0)
        for i, (n, m) in enumerate(shapes)
    ]
    return TargetWorkload.from_jobs(jobs, coverage=1.0)


def v1_pod(
    milli: int | str | None = None,
    count: int | str | None = None,
    models: str | None = None,
    cpu: str = "1",
    memory: str = "1Gi",
    name: str | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A pod built as ``V1Pod`` and serialized by the client (camelCase API JSON)."""
    uid = next(_uids)
    notes = dict(annotations or {})
    if milli is not None:
        notes[GPU_MILLI] = str(milli)
    if count is not None:
        notes[GPU_COUNT] = str(count)
    if models is not None:
        notes[GPU_CARD_MODEL] = models
    pod = client.V1Pod(
        api_version="v1",
        kind="Pod",
        metadata=client.V1ObjectMeta(
            name=name or f"pod-{uid}", namespace="team-a", uid=f"uid-{uid}", annotations=notes
        ),
        spec=client.V1PodSpec(
            scheduler_name="gpumosaic",
            containers=[
                client.V1Container(
                    name="main",
                    image="pytorch/pytorch",
                    resources=client.V1ResourceRequirements(
                        requests={"cpu": cpu, "memory": memory},
                        limits={GPU_MILLI: str(milli or 0)},
                    ),
                )
            ],
        ),
    )
    plain: dict[str, Any] = API.sanitize_for_serialization(pod)
    return plain


def v1_node(name: str, model: str, gpus: int, cpu: str = "64", memory: str = "256Gi") -> dict:
    resources = {
        "cpu": cpu,
        "memory": memory,
        "pods": "110",
        GPU_COUNT: str(gpus),
        GPU_MILLI: str(gpus * 1000),
    }
    node = client.V1Node(
        api_version="v1",
        kind="Node",
        metadata=client.V1ObjectMeta(name=name, labels={GPU_CARD_MODEL: model}),
        status=client.V1NodeStatus(capacity=resources, allocatable=resources),
    )
    plain: dict[str, Any] = API.sanitize_for_serialization(node)
    return plain


def service(
    spec: ClusterSpec,
    db: Path,
    placement: str = "fgd",
    target: TargetWorkload | None = None,
    seed: int = 0,
) -> ExtenderService:
    backend = SqliteBackend(spec, db, "test-cluster")
    source = TargetSource(target or workload((1, 500), (1, 1000)), 100, 10)
    return ExtenderService(backend, placement, source, seed)


def app_client(svc: ExtenderService) -> TestClient:
    return TestClient(create_app(svc), raise_server_exceptions=False)


def args(pod: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """ExtenderArgs of a nodeCacheCapable kube-scheduler."""
    return {"Pod": pod, "Nodes": None, "NodeNames": names}


def binding(pod: dict[str, Any], node: str) -> dict[str, str]:
    meta = pod["metadata"]
    return {
        "PodName": meta["name"],
        "PodNamespace": meta["namespace"],
        "PodUID": meta["uid"],
        "Node": node,
    }
