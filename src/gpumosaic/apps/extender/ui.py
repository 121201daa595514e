"""``/ui`` of the scheduler extender: the node mosaic (every GPU, the pods on it and their
milli-GPU) and the recent binds and releases, as a ``stream.Feed`` world.

Read through the extender's public views: ``views.state_document`` (nodes, capacities,
counters), ``ExtenderService.held()`` (who holds what) and its metrics' request counter.
The extender keeps no history of binds; this view keeps one by comparing who holds GPUs
at each refresh (a pod bound and released within one interval is not listed; the
``requests`` counts are exact).

Sections: ``service`` (placement, backend, totals, counters, requests by verb and
outcome), ``nodes`` (name -> model, GPUs ``[[milli free, [[pod, milli], ...]], ...]``, CPU
and memory), ``binds`` (sequence -> time, pod, node, GPUs, milli, bind or release; the
last ``BINDS_KEPT``).
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter

from gpumosaic.apps.extender.views import state_document
from gpumosaic.runtime.ui.http import ui_routes
from gpumosaic.runtime.ui.stream import Feed, World

if TYPE_CHECKING:
    from gpumosaic.apps.extender.metrics import ExtenderMetrics
    from gpumosaic.apps.extender.service import ExtenderService

BINDS_KEPT = 50

Holding = tuple[str, str, tuple[int, ...], int]  # pod, node, GPUs, milli per GPU


class ExtenderView:
    def __init__(self, service: ExtenderService, metrics: ExtenderMetrics | None = None) -> None:
        self.service = service
        self.metrics = metrics
        self.binds: deque[tuple[int, dict[str, Any]]] = deque(maxlen=BINDS_KEPT)
        self._held: dict[str, Holding] | None = None
        self._seq = 0

    def world(self) -> World:
        now = time.time()
        svc = self.service
        doc = state_document(svc)
        names = [n["name"] for n in doc["nodes"]]
        held: dict[str, Holding] = {}
        on_gpu: dict[tuple[str, int], list[list[Any]]] = {}
        for request, a, _untracked in svc.held():
            node = names[a.node] if 0 <= a.node < len(names) else "?"
            held[request.key] = (request.label, node, tuple(a.gpus), a.gpu_milli)
            for g in a.gpus:
                on_gpu.setdefault((node, g), []).append([request.label, a.gpu_milli])
        self._note_binds(held, now)
        nodes = {
            n["name"]: {
                "model": n["gpu_model"],
                "gpus": [[g["milli_free"], on_gpu.get((n["name"], g["index"]), [])]
                         for g in n["gpus"]],
                "cpu": [n["cpu_milli_free"], n["cpu_milli"]],
                "memory": [n["memory_mib_free"], n["memory_mib"]],
                "cpu_pods": n["pods_without_gpu"],
            }
            for n in doc["nodes"]
        }  # fmt: skip
        service = {
            "now": round(now, 1),
            "placement": doc["placement"],
            "backend": doc["backend"],
            "gpu_milli_capacity": doc["gpu_milli_capacity"],
            "gpu_milli_allocated": doc["gpu_milli_allocated"],
            "pods_bound": doc["pods_bound"],
            "target_workload": doc["target_workload"],
            "counters": {k: v for k, v in doc["counters"].items() if k != "conflicts"},
            "conflicts": doc["counters"]["conflicts"],
            "requests": self._requests(),
        }
        return {
            "service": {"s": service},
            "nodes": nodes,
            "binds": {str(seq): e for seq, e in self.binds},
        }

    def _note_binds(self, held: dict[str, Holding], now: float) -> None:
        before = self._held
        self._held = held
        if before is None:  # the first look: what is held was bound before the page
            return
        for key, holding in held.items():
            if before.get(key) != holding:
                self._add(now, "bind", holding)
        for key, holding in before.items():
            if key not in held:
                self._add(now, "release", holding)

    def _add(self, now: float, what: str, holding: Holding) -> None:
        pod, node, gpus, milli = holding
        self._seq += 1
        self.binds.append(
            (self._seq, {"t": round(now, 1), "what": what, "pod": pod, "node": node,
                         "gpus": list(gpus), "milli": milli})
        )  # fmt: skip

    def _requests(self) -> dict[str, dict[str, int]]:
        """Requests by verb and outcome, from the metrics' counter."""
        out: dict[str, dict[str, int]] = {}
        if self.metrics is None:
            return out
        for family in self.metrics.requests.collect():
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    verb, outcome = sample.labels["verb"], sample.labels["outcome"]
                    out.setdefault(verb, {})[outcome] = int(sample.value)
        return out


def ui_router(
    service: ExtenderService, metrics: ExtenderMetrics | None = None, token: str = ""
) -> APIRouter:
    """``/ui`` and ``/ui/stream`` for ``live.extender.app.create_app``: with ``--token`` the
    stream needs it (as ``/state`` and ``/metrics`` do); the page itself holds no data."""
    view = ExtenderView(service, metrics)
    return ui_routes(Feed(view.world, 1.0), "extender", "gpumosaic extender", lambda: token)
