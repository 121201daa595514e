"""``/ui`` of ``gpumosaic serve``: the cluster as a GPU mosaic, the queue with why each job
waits, progress, rates, estimated finishes, the round's placement and its history,
fairness and fallbacks, as a ``stream.Feed`` world.

Everything is read from the running service's public parts (store, lease table, driver,
decider); nothing here decides or writes. The reading runs in the API's threads while the
round loop runs in its own: containers are copied (one C call under the GIL) before they
are read, and a world that could not be built (a boundary changed the decider's tables
under it) is counted (``ui_rebuild_retries``) and built again at the next interval.

Sections of the world (the page's ``serve.js`` reads them):

- ``service``: ``{"s": {...}}`` policy, placement, round, counts, fairness, fallbacks;
- ``nodes``: node index -> name, GPU model, GPU count (fixed);
- ``gpus``: ``"node.gpu"`` -> ``[[job id, milli], ...]`` held by active leases now;
- ``jobs``: job id -> the job (live ones, and the ``RECENT_TERMINAL`` last to finish);
- ``rounds``: round index -> start, end and ``{"node.gpu": [job ids]}`` (the last
  ``ROUNDS_KEPT`` rounds): the allocation history.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, cast

import numpy as np
from fastapi import APIRouter

from gpumosaic.live.rounds.cluster import LiveCluster
from gpumosaic.live.rounds.decider import LiveRoundDecider
from gpumosaic.live.rounds.driver import RoundDriver
from gpumosaic.live.rounds.records import JobRow
from gpumosaic.live.rounds.store import Store
from gpumosaic.live.rounds.submission import TERMINAL_STATES
from gpumosaic.live.ui.http import ui_routes
from gpumosaic.live.ui.stream import Feed, World
from gpumosaic.model.gpu import MILLI_PER_GPU

ROUNDS_KEPT = 24  # rounds of allocation history on the page
RECENT_TERMINAL = 100  # finished / failed / cancelled / rejected jobs kept on the page


class RoundService(Protocol):
    """What the view reads of ``live.rounds.service.Service``."""

    store: Store
    cluster: LiveCluster
    decider: LiveRoundDecider
    driver: RoundDriver | None
    token: str
    clock: Callable[[], float]

    @property
    def config(self) -> Any: ...

    def live_steps(self, job: JobRow) -> float: ...


@dataclass(frozen=True, slots=True)
class RoundCells:
    """One round of the history: who held which GPU."""

    start_s: float
    cells: dict[str, list[int]]


def _r(value: float, digits: int = 3) -> float | None:
    """Rounded and JSON-safe (None for NaN/inf): fewer bytes, fewer spurious changes."""
    if not math.isfinite(value):
        return None
    return round(float(value), digits)


class RoundsView:
    """Builds the world of one round service (see the module doc)."""

    def __init__(self, service: RoundService) -> None:
        self.service = service
        spec = service.cluster.spec
        self.models = tuple(m.name for m in service.decider.models)
        self.total_gpus = float(spec.num_gpus)
        self.nodes = {
            str(n): {"name": node.name, "model": node.gpu.name, "gpus": node.num_gpus}
            for n, node in enumerate(spec.nodes)
        }
        self.history: dict[int, RoundCells] = {}
        self.round_ends: dict[int, float] = {}
        self._seen_round = -1
        self._loaded = False
        self.rebuild_retries = 0
        self._entity_rows: tuple[object, dict[int, int]] = (None, {})

    # ---- the world ---------------------------------------------------------------------

    def world(self) -> World:
        for _attempt in range(3):
            try:
                return self._world()
            except (IndexError, KeyError, ValueError, RuntimeError):
                # The round loop replaced a table while we read it: read again.
                self.rebuild_retries += 1
        return self._world()

    def _world(self) -> World:
        svc = self.service
        now = svc.clock()
        driver = svc.driver
        jobs = svc.store.jobs()
        live = [j for j in jobs if j.state not in TERMINAL_STATES]
        ended = sorted(
            (j for j in jobs if j.state in TERMINAL_STATES),
            key=lambda j: (j.finished_at or 0.0, j.id),
        )[-RECENT_TERMINAL:]
        gpus: dict[str, list[list[int]]] = {
            f"{n}.{g}": []
            for n, node in enumerate(svc.cluster.spec.nodes)
            for g in range(node.num_gpus)
        }
        for lease in svc.store.leases(active_only=True):
            for node, ids, milli in lease.parts:
                for g in ids:
                    gpus.setdefault(f"{node}.{g}", []).append([lease.job_id, milli])
        self._track_rounds(now)
        estimates = self._estimates(live, now)
        out_jobs: dict[str, Any] = {}
        for job in live:
            out_jobs[str(job.id)] = self._job(job, estimates.get(job.id), now)
        for job in ended:
            out_jobs[str(job.id)] = self._job(job, None, now)
        rhos = [e.rho for e in estimates.values() if e.rho is not None]
        counts: dict[str, int] = {}
        for job in jobs:
            counts[job.state] = counts.get(job.state, 0) + 1
        service = {
            "now": _r(now, 1),
            "policy": svc.config.policy,
            "placement": svc.config.placement,
            "round_s": svc.config.round_s,
            "round": driver.round_idx if driver is not None else None,
            "round_end": _r(driver.round_end, 2) if driver is not None else None,
            "counts": counts,
            "models": list(self.models),
            "gpus_total": int(self.total_gpus),
            "rho_mean": _r(float(np.mean(rhos)), 2) if rhos else None,
            "rho_max": _r(float(np.max(rhos)), 2) if rhos else None,
            "fallbacks": svc.decider.fallbacks().to_json(),
            "counters": self._counters(),
            "ui_rebuild_retries": self.rebuild_retries,
        }
        rounds = {
            str(i): {"start": _r(c.start_s, 2), "end": _r(self.round_ends.get(i, math.nan), 2),
                     "cells": c.cells}
            for i, c in self.history.items()
        }  # fmt: skip
        return {
            "service": {"s": service},
            "nodes": self.nodes,
            "gpus": gpus,
            "jobs": out_jobs,
            "rounds": rounds,
        }

    def _counters(self) -> dict[str, int]:
        driver = self.service.driver
        if driver is None:
            return {}
        c = driver.counters
        return {
            "leases_launched": c.launches,
            "lease_extensions": c.extensions,
            "lease_stops": c.stops,
            "leases_lost": c.lost,
            "job_retries": c.retries,
            "forced_solves": c.forced_solves,
            "unmeasured_grants": c.unmeasured_grants,
            "policy_solves": self.service.decider.book.solves,
        }

    # ---- rounds ------------------------------------------------------------------------

    def _track_rounds(self, now: float) -> None:
        driver = self.service.driver
        if driver is None:
            return
        if not self._loaded:
            self._loaded = True
            self._load_history(driver.round_idx)
        idx = driver.round_idx
        if idx == self._seen_round:
            return
        if self._seen_round >= 0:
            self.round_ends.setdefault(self._seen_round, now)
        self._seen_round = idx
        plan = driver.plan
        cells: dict[str, list[int]] = {}
        if plan is not None:
            for entry in plan.entries:
                for part in entry.parts:
                    for g in part.gpus:
                        cells.setdefault(f"{part.node}.{g}", []).extend(entry.job_ids)
        start = driver.round_end - driver.config.round_s
        self.history[idx] = RoundCells(start, cells)
        for old in sorted(self.history)[:-ROUNDS_KEPT]:
            del self.history[old]
            self.round_ends.pop(old, None)

    def _load_history(self, current: int) -> None:
        """The rounds before this view started, from the store's leases (a lease covers
        its round and the rounds it was extended into)."""
        first = current - ROUNDS_KEPT + 1
        starts = {idx: start for idx, start, _end, _plan in self.service.store.rounds()
                  if first <= idx < current}  # fmt: skip
        ends = {idx: end for idx, _s, end, _p in self.service.store.rounds() if end is not None}
        for idx, start in starts.items():
            self.history[idx] = RoundCells(start, {})
            if idx in ends:
                self.round_ends[idx] = ends[idx]
        for lease in self.service.store.leases():
            for idx in range(lease.round, lease.round + lease.extensions + 1):
                held = self.history.get(idx)
                if held is None:
                    continue
                for node, ids, _milli in lease.parts:
                    for g in ids:
                        held.cells.setdefault(f"{node}.{g}", []).append(lease.job_id)

    # ---- jobs --------------------------------------------------------------------------

    def _estimates(self, live: list[JobRow], now: float) -> dict[int, JobEstimate]:
        """Per live job: its rates, allocation, effective rate and fairness estimate."""
        driver = self.service.driver
        if driver is None:
            return {}
        decider = self.service.decider
        row_of = driver.row_of.copy()
        table = decider.jobs
        rates_all = table.rates
        demand_all = table.demand_milli
        ent = decider.book.entities
        x_of = self._allocation_rows(ent)
        n_active = max(1, decider.jobs.n_active)
        out: dict[int, JobEstimate] = {}
        for job in live:
            row = row_of.get(job.id)
            if row is None or row >= len(rates_all):
                out[job.id] = JobEstimate(None, None, None, 0.0, None)
                continue
            rates = rates_all[row].copy()
            measured = [driver.meter.is_measured(job.id, t) for t in range(len(self.models))]
            x = None
            if ent is not None and row in x_of:
                x = ent.x[x_of[row]].copy()
            eff = float((x * rates).sum()) if x is not None else 0.0
            done = self.service.live_steps(job)
            left = max(job.steps - done, 0.0)
            alone = float(rates.max()) if len(rates) else 0.0
            rho = None
            if alone > 0 and eff > 0:
                gpus = float(demand_all[row]) / MILLI_PER_GPU
                t_fair = job.steps / alone * max(1.0, n_active * gpus / self.total_gpus)
                rho = _r(((now - job.submitted_at) + left / eff) / t_fair, 2)
            out[job.id] = JobEstimate(
                rates=[[_r(float(r)), m] for r, m in zip(rates.tolist(), measured, strict=True)],
                allocation=[_r(float(v)) for v in x.tolist()] if x is not None else None,
                received=self._received(ent, x_of.get(row)) if ent is not None else None,
                effective=_r(eff, 4) or 0.0,
                rho=rho,
            )
        return out

    def _allocation_rows(self, ent: Any) -> dict[int, int]:
        """row -> entity index of single jobs in the allocation in force (cached per
        table: a solve makes a new one)."""
        if ent is None:
            return {}
        cached_for, rows = self._entity_rows
        if cached_for is ent:
            return rows
        singles = np.flatnonzero(ent.rows_b < 0)
        rows = {
            int(r): int(e)
            for e, r in zip(singles.tolist(), ent.rows_a[singles].tolist(), strict=True)
        }
        self._entity_rows = (ent, rows)
        return rows

    def _received(self, ent: Any, e: int | None) -> list[float | None] | None:
        """Per GPU model, the seconds of its time the job received since the last solve
        (Gavel's accounting less the half-round credit every entity starts with)."""
        if e is None:
            return None
        credit = self.service.decider.book.credit_s
        return [_r(max(float(v) - credit, 0.0), 1) for v in ent.time[e].tolist()]

    def _job(self, job: JobRow, est: JobEstimate | None, now: float) -> dict[str, Any]:
        done = job.steps_done if job.terminal else self.service.live_steps(job)
        out: dict[str, Any] = {
            "name": job.name,
            "state": job.state,
            "steps": _r(job.steps, 1),
            "done": _r(done, 1),
            "gpus": job.num_gpu,
            "milli": job.gpu_milli,
            "type": job.gpu_type,
            "index": job.gpu_index,
            "attained_s": _r(job.attained_s, 1),
            "attempts": job.attempts,
            "submitted": _r(job.submitted_at, 2),
            "started": None if job.started_at is None else _r(job.started_at, 2),
            "finished": None if job.finished_at is None else _r(job.finished_at, 2),
            "reason": job.reason,
        }
        if est is not None:
            out["rates"] = est.rates
            out["x"] = est.allocation
            out["got_s"] = est.received
            out["eff"] = est.effective
            out["rho"] = est.rho
            if job.state == "queued":
                out["why"] = self._why(job, est)
        return out

    def _why(self, job: JobRow, est: JobEstimate) -> str:
        """Why a queued job is not running this round, from the decider's state."""
        driver = self.service.driver
        if job.cancel_requested:
            return "cancel requested: leaves at its process's end"
        if driver is None:
            return "the round loop has not started"
        if job.id not in driver.row_of:
            return "submitted during this round: admitted at the next round boundary"
        if job.id in driver.pending:
            return "planned for this round: starts once its previous process has stopped"
        if est.allocation is None:
            return "not in the allocation in force yet: the policy solves at the next boundary"
        if not any(v and v > 0 for v in est.allocation):
            return "the policy gives it no GPU time now (allocation 0 on every GPU model)"
        parts = []
        for name, x, got in zip(self.models, est.allocation, est.received or [], strict=False):
            if x:
                parts.append(f"{name} {x:.0%}" + ("" if got is None else f" (got {got:g} s)"))
        return (
            "waits its turn: allocation " + ", ".join(parts) + " of a GPU's time since the "
            "last solve; jobs further behind their allocation ran first"
        )


@dataclass(frozen=True, slots=True)
class JobEstimate:
    rates: list[list[Any]] | None  # per model: [steps/s, measured?]
    allocation: list[float | None] | None  # the policy's share of each model's time
    received: list[float | None] | None  # seconds of each model received since the solve
    effective: float  # steps/s the allocation gives: sum over models of x * rate
    rho: float | None  # finish-time fairness estimate (docs/live.md, "Live view")


def rounds_feed(service: RoundService, interval_s: float = 1.0) -> Feed:
    """The feed of a round service; its view is built at the first refresh (a page asked),
    so an app built around a partial service (tests) costs nothing."""
    views: list[RoundsView] = []

    def world() -> World:
        if not views:
            views.append(RoundsView(service))
        return views[0].world()

    return Feed(world, interval_s)


def ui_router(service: object, interval_s: float = 1.0) -> APIRouter:
    """``/ui`` and ``/ui/stream`` for ``live.rounds.api.create_app`` (the service's token)."""
    svc = cast(RoundService, service)
    return ui_routes(rounds_feed(svc, interval_s), "rounds", "gpumosaic serve", lambda: svc.token)
