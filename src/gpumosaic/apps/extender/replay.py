"""``gpumosaic extender replay``: play kube-scheduler against an extender over HTTP.

The tasks come in ``fill``'s order (same shuffle, same inflation, same seed). For each
pod the stand-in does what kube-scheduler's scheduling cycle does with an HTTP extender:

1. the extender is asked only about pods with one of its ``managedResources`` (every
   replay pod carries ``alibabacloud.com/gpu-milli``, 0 for CPU-only pods);
2. in-tree NodeResourcesFit first: only nodes with the pod's CPU and memory free in the
   scheduler's own cache go to the extender;
3. ``filter`` with ``NodeNames`` (nodeCacheCapable) or the full ``Nodes`` list;
4. ``prioritize`` unless exactly one node is left (kube-scheduler skips scoring then);
   total = score x weight x 10 (MaxNodeScore / MaxExtenderPriority), highest wins, ties
   drawn uniformly as selectHost does (from a generator of its own);
5. ``bind`` on the extender (the binder); on success the pod is assumed in the cache.

When the stand-in starts the extender itself, it builds it like ``fill`` builds its
placement: the same target workload and the same random generator, drawn past the fill
order, so the two make the same decisions. ``restart_at`` stops that extender after so
many tasks and starts a new one from its SQLite state (rebuilt from the pods' annotations).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt

from gpumosaic.apps.extender.app import create_app
from gpumosaic.apps.extender.server import RunningServer, settle_heap, start_in_thread
from gpumosaic.apps.extender.service import ExtenderService
from gpumosaic.apps.extender.sqlite_store import SqliteBackend
from gpumosaic.apps.extender.target import DEFAULT_REFRESH, DEFAULT_WINDOW, TargetSource
from gpumosaic.apps.extender.vocabulary import GPU_MILLI, node_object, pod_object
from gpumosaic.mechanisms.fill.simulator import fill_order
from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.job import JobSpec
from gpumosaic.placement.workload import TargetWorkload

VERBS = ("filter", "prioritize", "bind")
MANAGED_RESOURCES = frozenset({GPU_MILLI})
SCORE_SCALE = 10  # MaxNodeScore (100) / MaxExtenderPriority (10)
HTTP_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class ReplayResult:
    placement: str
    seed: int
    tasks: int
    bound: int
    failed_by_stage: dict[str, int]  # cpu_memory (in-tree), filter, filter_error, bind
    allocation_rate_pct: float
    latency_ms: dict[str, dict[str, float]]
    placed: npt.NDArray[np.bool_]  # per task, in replay order
    elapsed_s: float
    restarts: int
    node_cache_capable: bool

    @property
    def failed(self) -> int:
        return self.tasks - self.bound

    def to_json(self) -> dict[str, Any]:
        return {
            "placement": self.placement,
            "seed": self.seed,
            "tasks": self.tasks,
            "bound": self.bound,
            "failed": self.failed,
            "failed_by_stage": self.failed_by_stage,
            "allocation_rate_pct": round(self.allocation_rate_pct, 4),
            "latency_ms": self.latency_ms,
            "node_cache_capable": self.node_cache_capable,
            "restarts": self.restarts,
            "elapsed_s": round(self.elapsed_s, 3),
        }


def _percentiles(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {"p50": 0.0, "p99": 0.0, "count": 0}
    ms = np.asarray(samples) * 1000.0
    return {
        "p50": round(float(np.percentile(ms, 50)), 3),
        "p99": round(float(np.percentile(ms, 99)), 3),
        "count": len(samples),
    }


class LocalExtender:
    """An extender in this process (a uvicorn thread) on a SQLite file, restartable."""

    def __init__(
        self,
        cluster: ClusterSpec,
        cluster_label: str,
        placement: str,
        workload: TargetWorkload | None,
        db: Path,
        rng: np.random.Generator | None,
    ) -> None:
        self.args = (cluster, cluster_label, placement, workload, db)
        self.server: RunningServer | None = None
        self.backend: SqliteBackend | None = None
        self.start(rng)

    def start(self, rng: np.random.Generator | None) -> None:
        cluster, label, placement, workload, db = self.args
        self.backend = SqliteBackend(cluster, db, label)
        target = TargetSource(workload, DEFAULT_WINDOW, DEFAULT_REFRESH)
        self.service = ExtenderService(self.backend, placement, target, rng=rng)
        app = create_app(self.service)
        settle_heap()
        self.server = start_in_thread(app)

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
        if self.backend is not None:
            self.backend.close()
        self.server = self.backend = None

    def restart(self) -> None:
        """A new process in all but name: nothing survives but the SQLite file."""
        self.stop()
        self.start(None)


class SchedulerStandIn:
    """The part of kube-scheduler that talks to one HTTP extender (the binder)."""

    def __init__(
        self,
        url: str,
        cluster: ClusterSpec,
        node_cache_capable: bool = True,
        weight: int = 1,
        seed: int = 0,
    ) -> None:
        self.client = httpx.Client(base_url=url, timeout=HTTP_TIMEOUT_S)
        self.node_cache_capable = node_cache_capable
        self.weight = weight
        self.names = [n.name for n in cluster.nodes]
        self.node_objects = [node_object(n) for n in cluster.nodes]
        self.index = {n: i for i, n in enumerate(self.names)}
        self.cpu_free = np.array([n.cpu_milli for n in cluster.nodes], dtype=np.int64)
        self.memory_free = np.array([n.memory_mib for n in cluster.nodes], dtype=np.int64)
        self.ties = np.random.default_rng([seed, 0x5E1EC7])  # selectHost's own randomness
        self.latency: dict[str, list[float]] = {v: [] for v in VERBS}

    def use(self, url: str) -> None:
        self.client.close()
        self.client = httpx.Client(base_url=url, timeout=HTTP_TIMEOUT_S)

    def close(self) -> None:
        self.client.close()

    def _post(self, verb: str, body: dict[str, Any]) -> tuple[bool, Any]:
        """(answered 200, the JSON). A 4xx is kube-scheduler's "failed with extender"
        for this pod; a 5xx breaks the extender's contract and stops the replay."""
        start = time.perf_counter()
        response = self.client.post("/" + verb, json=body)
        self.latency[verb].append(time.perf_counter() - start)
        if response.status_code >= 500:
            raise RuntimeError(f"{verb}: HTTP {response.status_code}: {response.text[:200]}")
        return response.status_code == 200, response.json()

    @staticmethod
    def interested(pod: dict[str, Any]) -> bool:
        """HTTPExtender.IsInterested: does a container request or limit a managed resource?"""
        for container in pod["spec"].get("containers", []):
            resources = container.get("resources") or {}
            for kind in ("requests", "limits"):
                if MANAGED_RESOURCES & set(resources.get(kind) or {}):
                    return True
        return False

    def schedule(self, pod: dict[str, Any], job: JobSpec) -> str:
        """One scheduling cycle; "" when bound, else the stage that failed it."""
        if not self.interested(pod):
            raise ValueError("the replay's pods must carry a managed resource")
        fit = (self.cpu_free >= job.cpu_milli) & (self.memory_free >= job.memory_mib)
        fits = np.flatnonzero(fit)
        if not len(fits):
            return "cpu_memory"
        args: dict[str, Any] = {"Pod": pod, "Nodes": None, "NodeNames": None}
        if self.node_cache_capable:
            args["NodeNames"] = [self.names[i] for i in fits]
        else:
            args["Nodes"] = {"metadata": {}, "items": [self.node_objects[i] for i in fits]}
        ok, result = self._post("filter", args)
        if not ok or result.get("Error"):
            return "filter_error"
        if self.node_cache_capable:
            names = list(result.get("NodeNames") or [])
        else:
            names = [n["metadata"]["name"] for n in (result.get("Nodes") or {}).get("items", [])]
        if not names:
            return "filter"
        host = names[0]
        if len(names) > 1:
            if self.node_cache_capable:
                args["NodeNames"] = names
            else:
                args["Nodes"] = result["Nodes"]
            ok, scores = self._post("prioritize", args)
            if not ok:
                scores = []  # kube-scheduler logs a prioritize error and goes on without it
            totals = {n: 0 for n in names}
            for entry in scores:
                if entry["Host"] in totals:
                    totals[entry["Host"]] += int(entry["Score"]) * self.weight * SCORE_SCALE
            best = max(totals.values())
            top = [n for n in names if totals[n] == best]
            host = top[int(self.ties.integers(len(top)))] if len(top) > 1 else top[0]
        meta = pod["metadata"]
        binding = {
            "PodName": meta["name"],
            "PodNamespace": meta["namespace"],
            "PodUID": meta["uid"],
            "Node": host,
        }
        ok, answer = self._post("bind", binding)
        if not ok or answer.get("Error"):
            return "bind"
        node = self.index[host]
        self.cpu_free[node] -= job.cpu_milli
        self.memory_free[node] -= job.memory_mib
        return ""


def replay(
    cluster: ClusterSpec,
    cluster_label: str,
    tasks: Sequence[JobSpec],
    placement: str,
    seed: int,
    inflate: float = 1.3,
    url: str | None = None,
    node_cache_capable: bool = True,
    restart_at: int | None = None,
    learn_target: bool = False,
    progress: Callable[[float], None] | None = None,
) -> ReplayResult:
    """Replay ``tasks`` in fill order through an extender (started here unless ``url``)."""
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    capacity = cluster.num_gpus * 1000
    order = fill_order(tasks, capacity, inflate, rng)
    local: LocalExtender | None = None
    restarts = 0
    with tempfile.TemporaryDirectory(prefix="gpumosaic-replay-") as scratch:
        if url is None:
            workload = None if learn_target else TargetWorkload.from_jobs(tasks)
            db = Path(scratch) / "extender.sqlite"
            local = LocalExtender(cluster, cluster_label, placement, workload, db, rng)
            url = local.url
        client = SchedulerStandIn(url, cluster, node_cache_capable, seed=seed)
        placed = np.zeros(len(order), dtype=bool)
        stages: dict[str, int] = {}
        bound_milli = 0
        report_every = max(1, len(order) // 100)
        try:
            for i, task_index in enumerate(order):
                if local is not None and restart_at is not None and i == restart_at:
                    local.restart()
                    client.use(local.url)
                    restarts += 1
                job = replace(tasks[task_index], id=i)
                pod = pod_object(job, f"task-{i:06d}", "replay", f"uid-{i:06d}")
                stage = client.schedule(pod, job)
                if stage:
                    stages[stage] = stages.get(stage, 0) + 1
                else:
                    placed[i] = True
                    bound_milli += job.total_gpu_milli
                if progress is not None and i % report_every == 0:
                    progress(i / len(order))
        finally:
            client.close()
            if local is not None:
                local.stop()
    if progress is not None:
        progress(1.0)
    return ReplayResult(
        placement=placement,
        seed=seed,
        tasks=len(order),
        bound=int(placed.sum()),
        failed_by_stage=dict(sorted(stages.items())),
        allocation_rate_pct=100.0 * bound_milli / capacity if capacity else 0.0,
        latency_ms={v: _percentiles(client.latency[v]) for v in VERBS},
        placed=placed,
        elapsed_s=time.perf_counter() - start,
        restarts=restarts,
        node_cache_capable=node_cache_capable,
    )
