"""``/ui`` of ``gpumosaic serve --mechanism gandiva``: the cluster as a GPU mosaic, the
queue, each job's progress, steps/s, GPU time, suspensions and migrations, and the
driver's and decider's counts, as a ``stream.Feed`` world.

The world has the sections the rounds page's script reads (``service``, ``nodes``,
``gpus``, ``jobs``, ``plan``, ``progress``; no ``rounds``: Gandiva has none), with
Gandiva's own header (its options, not a round policy), card and counters. Progress is
what ``gpumosaic jobs`` shows (a running job's live lease count), GPU time is the stored
credit plus the running lease's stepping time, and a GPU is held whole by the job running
on it alone (half each by a packed pair): Gandiva gives whole GPUs, whatever share the
executor reserves for a packable job. Nothing here decides or writes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import fields
from typing import Any, Protocol, cast

from fastapi import APIRouter

from gpumosaic.mechanisms.gandiva.live.driver import GandivaDriver
from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.runtime.cluster import LiveCluster
from gpumosaic.runtime.state.store import Store
from gpumosaic.runtime.ui.http import ui_routes
from gpumosaic.runtime.ui.job_values import held_a_gpu, step_count
from gpumosaic.runtime.ui.state_file import JobFacts, StoreReader
from gpumosaic.runtime.ui.stream import Feed, World


class GandivaService(Protocol):
    """What the view reads of the running service."""

    store: Store
    cluster: LiveCluster
    gandiva_driver: GandivaDriver | None
    clock: Callable[[], float]

    @property
    def config(self) -> Any: ...

    @property
    def table(self) -> Any: ...  # LeaseTable: live steps of running leases


def _r(value: float, digits: int = 3) -> float | None:
    if not math.isfinite(value):
        return None
    return round(float(value), digits)


def header(driver: GandivaDriver | None, placement: str) -> str:
    """Gandiva and its options, as the page's subtitle."""
    if driver is None:
        return "Gandiva (starting)"
    c = driver.decider.config
    on = {True: "on", False: "off"}
    if driver.decider.ranker is None:  # no --placement: Gandiva's least loaded first
        placement = "least loaded"
    return (
        f"Gandiva · quantum {c.quantum_s:g} s · packing {on[c.packing]} (profile "
        f"{c.profile_s:g} s) · migration {on[c.migration]} · time slicing "
        f"{on[c.time_slicing]} · up to {c.max_share} jobs per GPU · placement {placement}"
    )


class GandivaView:
    """Builds the world of one Gandiva service (see the module doc)."""

    def __init__(self, service: GandivaService) -> None:
        self.service = service
        spec = service.cluster.spec
        self.models = tuple(m.name for m in spec.gpu_models)
        self.nodes = {
            str(n): {"name": node.name, "model": node.gpu.name, "gpus": node.num_gpus}
            for n, node in enumerate(spec.nodes)
        }
        self.gpu_keys = tuple(
            f"{n}.{g}" for n, node in enumerate(spec.nodes) for g in range(node.num_gpus)
        )
        self.reader = StoreReader(service.store)

    def world(self) -> World:
        svc = self.service
        driver = svc.gandiva_driver
        self.reader.read()
        facts = self.reader.facts
        gpus: dict[str, list[list[int]]] = {k: [] for k in self.gpu_keys}
        for job_id, parts in facts.held:
            for node, ids, _milli in parts:
                for g in ids:
                    gpus.setdefault(f"{node}.{g}", []).append([job_id, 0])
        for holders in gpus.values():  # whole GPUs: shared evenly by who runs on them
            for holder in holders:
                holder[1] = MILLI_PER_GPU // len(holders)
        jobs = {str(j.id): self._job(j, driver) for j in (*facts.live, *facts.ended)}
        progress = {str(j.id): [_r(self._steps(j), 1), None] for j in facts.live}
        plan = {str(j.id): self._rates(j) for j in facts.live if j.state == "running"}
        for j in facts.live:
            if j.state == "queued":
                plan.setdefault(str(j.id), {})["why"] = self._why(j, driver)
        service = {
            "now": _r(svc.clock(), 1),
            "header": header(driver, str(svc.config.placement or "Gandiva's own")),
            "round": None,
            "round_s": None,
            "counts": facts.counts,
            "models": list(self.models),
            "gpus_total": len(self.gpu_keys),
            "rho_mean": None,
            "rho_max": None,
            "fallbacks": {} if driver is None else driver.decider.fallbacks.to_json(),
            "card": self._card(driver),
            "counters": self._counters(driver),
            "counter_labels": [[k, k.replace("_", " ")] for k in self._counters(driver)],
        }
        return {
            "service": {"s": service},
            "nodes": self.nodes,
            "gpus": gpus,
            "jobs": jobs,
            "plan": plan,
            "progress": progress,
        }

    def _steps(self, job: JobFacts) -> float:
        """As ``gpumosaic jobs``: the running lease's count, else the stored one."""
        if job.lease_id is not None:
            lease = self.service.table.get(job.lease_id)
            if lease is not None:
                return float(lease.steps)
        return job.steps_done

    def _job(self, job: JobFacts, driver: GandivaDriver | None) -> dict[str, Any]:
        held = 0.0 if driver is None or job.state != "running" else driver.held_gpu_s(job.id)
        row = self.service.store.gandiva_job(job.id)
        return {
            "name": job.name,
            "state": job.state,
            "steps": step_count(job.steps),
            "done": step_count(self._steps(job)),
            "gpus": job.num_gpu,
            "milli": job.gpu_milli,
            "type": job.gpu_type if held_a_gpu(job) else None,  # not the store's default
            "index": job.gpu_index if held_a_gpu(job) else None,
            "attained_s": _r(job.attained_s + held, 1),
            "attempts": job.attempts,
            "submitted": _r(job.submitted_at, 2),
            "started": None if job.started_at is None else _r(job.started_at, 2),
            "finished": None if job.finished_at is None else _r(job.finished_at, 2),
            "reason": job.reason,
            "suspensions": 0 if row is None else row.suspensions,
            "migrations": 0 if row is None else row.migrations,
            "packed_with": None if row is None else row.packed_with,
        }

    def _rates(self, job: JobFacts) -> dict[str, Any]:
        known = self.service.store.throughputs(job.id)
        rates = [known.get(m) for m in self.models]
        return {"rates": rates, "measured": [r is not None for r in rates]}

    def _why(self, job: JobFacts, driver: GandivaDriver | None) -> str:
        if job.cancel_requested:
            return "cancel requested: leaves at its process's end"
        if driver is None:
            return "the service loop has not started"
        gjob = driver.decider.jobs.get(job.id)
        if gjob is None:
            return "submitted: admitted at the next tick"
        if gjob.group < 0:
            return "no GPU set has room for it (queued in arrival order)"
        return "suspended: its GPU set's time slice belongs to another job now"

    def _card(self, driver: GandivaDriver | None) -> list[Any]:
        c = driver.counters if driver is not None else None
        if c is None:
            return ["suspensions", "-", ""]
        packed = driver.shown.packed_now() if driver is not None else 0
        return ["suspensions", c.suspensions, f"{c.migrations} migrations, {packed} jobs packed"]

    def _counters(self, driver: GandivaDriver | None) -> dict[str, int]:
        if driver is None:
            return {}
        out = {f.name: int(getattr(driver.counters, f.name)) for f in fields(driver.counters)}
        sup = driver.supervisor.counters
        out.update(launches=sup.launches, stops=sup.stops, lost=sup.lost, retries=sup.retries)
        return out


def gandiva_feed(service: GandivaService, interval_s: float = 1.0) -> Feed:
    views: list[GandivaView] = []

    def world() -> World:
        if not views:
            views.append(GandivaView(service))
        return views[0].world()

    return Feed(world, interval_s)


def ui_router(service: object, interval_s: float = 1.0) -> APIRouter:
    """``/ui`` and ``/ui/stream`` of a Gandiva service (the service's token)."""
    svc = cast(GandivaService, service)
    token = str(svc.config.token)
    feed = gandiva_feed(svc, interval_s)
    return ui_routes(feed, "gandiva", "gpumosaic serve: Gandiva", lambda: token, "rounds")
