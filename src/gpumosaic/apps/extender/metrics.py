"""Prometheus metrics of one extender (its own registry, so several can run in a process).

Requests and latency per verb; GPUs and milli allocated, capacity and FGD's fragmentation
rate read from the service at scrape time; the service's fallback and error counters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from gpumosaic.placement.fragmentation import shared_tracker

if TYPE_CHECKING:
    from gpumosaic.apps.extender.service import ExtenderService

LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)
PREFIX = "gpumosaic_extender_"


def _reader(obj: object, name: str) -> Callable[[], float]:
    return lambda: float(getattr(obj, name))


class ExtenderMetrics:
    def __init__(self, service: ExtenderService) -> None:
        self.service = service
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            PREFIX + "requests",
            "Extender requests by verb and outcome (ok, error = 200 with Error, bad_request = 400)",
            ("verb", "outcome"),
            registry=r,
        )
        self.latency = Histogram(
            PREFIX + "request_seconds",
            "Time to answer one request, by verb",
            ("verb",),
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        gauges = {
            "gpus_allocated": ("GPUs with any share allocated", self._gpus_allocated),
            "gpu_milli_allocated": ("milli-GPU allocated", self._milli_allocated),
            "gpu_milli_capacity": ("milli-GPU in the cluster", self._milli_capacity),
            "fragmentation_rate": (
                "FGD fragmentation / free milli-GPU (0..1) for the target workload",
                self._fragmentation_rate,
            ),
            "pods_bound": ("pods holding resources", lambda: float(len(service.held()))),
        }
        for name, (doc, read) in gauges.items():
            Gauge(PREFIX + name, doc, registry=r).set_function(read)
        counters = service.counters
        for name in (
            "node_fallbacks",
            "gpu_fallbacks",
            "bind_rejected",
            "bind_errors",
            "adopt_conflicts",
            "untracked_gpu_pods",
            "unreadable_pods",
            "dropped_pods",
        ):
            gauge = Gauge(PREFIX + name, f"count of {name.replace('_', ' ')}", registry=r)
            gauge.set_function(_reader(counters, name))

    def _gpus_allocated(self) -> float:
        with self.service._lock:
            s = self.service.nodes.state
            return float(((s.gpu_free < s.gpu_capacity) & s.gpu_exists).sum())

    def _milli_allocated(self) -> float:
        with self.service._lock:
            return float(self.service.nodes.state.allocated_gpu_milli)

    def _milli_capacity(self) -> float:
        with self.service._lock:
            return float(self.service.nodes.state.total_gpu_milli)

    def _fragmentation_rate(self) -> float:
        workload = self.service.target.workload
        if workload is None:
            return 0.0
        with self.service._lock:
            return shared_tracker(self.service.nodes.state, workload).rate()

    def observe(self, verb: str, outcome: str, seconds: float) -> None:
        self.requests.labels(verb, outcome).inc()
        self.latency.labels(verb).observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
