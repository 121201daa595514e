"""``/ui`` of ``gpumosaic serve``: the cluster as a GPU mosaic, the queue with why each job
waits, progress, rates, estimated finishes, the round's placement and its history,
fairness and fallbacks, as a ``stream.Feed`` world.

Everything is read from the running service's public parts (store, lease table, driver,
decider); nothing here decides or writes. The reading runs in the API's threads while the
round loop runs in its own: containers are copied (one C call under the GIL) before they
are read, and a world that could not be built (a boundary changed the decider's tables
under it) is counted (``ui_rebuild_retries``) and built again at the next interval.

Sections of the world (the page's ``rounds.js`` reads them):

- ``service``: ``{"s": {...}}`` policy, placement, round, counts, fairness, fallbacks;
- ``nodes``: node index -> name, GPU model, GPU count (fixed);
- ``gpus``: ``"node.gpu"`` -> ``[[job id, milli], ...]`` held by active leases now;
- ``jobs``: job id -> the job as stored (live ones, and the ``RECENT_TERMINAL`` last to
  finish): state, GPU, steps, times;
- ``plan``: live job id -> the decider's view of it: steps/s per model (measured or
  prior), the allocation and what it received, why it waits;
- ``progress``: live job id -> ``[steps done, rho]``, what moves every second;
- ``rounds``: round index -> start, end and ``{"node.gpu": [job ids]}`` (the last
  ``ROUNDS_KEPT`` rounds): the allocation history.

Cost (bench/bench_ui.py): the jobs and GPUs are read from the state file through the
view's own read-only SQLite connection (``state_file.StoreReader``), and only when the
file changed (SQLite's ``data_version``) or the decider moved (a boundary, a solve);
otherwise a refresh only reads the live steps of the running leases and recomputes rho,
as arrays.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, cast

import numpy as np
from fastapi import APIRouter

from gpumosaic.mechanisms.rounds.live.decider import LiveRoundDecider
from gpumosaic.mechanisms.rounds.live.driver import RoundDriver
from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.runtime.cluster import LiveCluster
from gpumosaic.runtime.state.store import Store
from gpumosaic.runtime.ui.http import ui_routes
from gpumosaic.runtime.ui.job_values import held_a_gpu as _held_a_gpu
from gpumosaic.runtime.ui.job_values import rounded as _r
from gpumosaic.runtime.ui.job_values import step_count as _count
from gpumosaic.runtime.ui.state_file import JobFacts, StoreReader
from gpumosaic.runtime.ui.stream import Feed, World

ROUNDS_KEPT = 24  # rounds of allocation history on the page


class RoundService(Protocol):
    """What the view reads of ``live.rounds.service.Service``."""

    store: Store
    cluster: LiveCluster
    decider: LiveRoundDecider
    driver: RoundDriver | None
    clock: Callable[[], float]

    @property
    def config(self) -> Any: ...

    @property
    def table(self) -> Any: ...  # LeaseTable: live steps of running leases


@dataclass(frozen=True, slots=True)
class RoundCells:
    """One round of the history: who held which GPU."""

    start_s: float
    cells: dict[str, list[int]]


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
        self.gpu_keys = tuple(
            f"{n}.{g}" for n, node in enumerate(spec.nodes) for g in range(node.num_gpus)
        )
        self.reader = StoreReader(service.store)
        self.history: dict[int, RoundCells] = {}
        self.round_ends: dict[int, float] = {}
        self._seen_round = -1
        self._loaded = False
        self.rebuild_retries = 0
        self._entity_rows: tuple[object, dict[int, int]] = (None, {})
        # What changes only at events (see the module doc), and what it was built from.
        self._slow_key: tuple[object, ...] = ()
        self._jobs: dict[str, Any] = {}
        self._plan: dict[str, Any] = {}
        self._job_cache: dict[int, tuple[JobFacts, dict[str, Any]]] = {}
        self._plan_cache: dict[int, tuple[JobFacts, dict[str, Any]]] = {}
        self._gpus: dict[str, list[list[int]]] = {}
        self._rounds: dict[str, Any] = {}
        self._live = _LiveArrays.empty()
        self._live_of: tuple[JobFacts, ...] = ()  # the rows ``_live`` was built from

    # ---- the world ---------------------------------------------------------------------

    def world(self) -> World:
        for _attempt in range(3):
            try:
                return self._world()
            except (IndexError, KeyError, ValueError, RuntimeError):
                # The round loop replaced a table while we read it: read again.
                self.rebuild_retries += 1
                self._slow_key = ()
        return self._world()

    def _world(self) -> World:
        svc = self.service
        now = svc.clock()
        driver = svc.driver
        stored = self.reader.read() or not self._slow_key
        decider = svc.decider
        slow_key = (
            id(decider.book.entities), decider.book.solves,
            None if driver is None else driver.round_idx,
            None if driver is None else len(driver.row_of),
            None if driver is None else len(driver.pending),
        )  # fmt: skip
        decided = slow_key != self._slow_key
        if stored or decided:
            self._track_rounds(now)
            self._rebuild_slow(stored, decided)
            self._slow_key = slow_key
        facts = self.reader.facts
        progress, rhos = self._progress(now)
        service = {
            "now": _r(now, 1),
            "policy": svc.config.policy,
            "placement": svc.config.placement,
            "round_s": svc.config.round_s,
            "round": driver.round_idx if driver is not None else None,
            "round_end": _r(driver.round_end, 2) if driver is not None else None,
            "counts": facts.counts,
            "models": list(self.models),
            "gpus_total": int(self.total_gpus),
            "rho_mean": _r(float(np.mean(rhos)), 2) if len(rhos) else None,
            "rho_max": _r(float(np.max(rhos)), 2) if len(rhos) else None,
            "fallbacks": decider.fallbacks().to_json(),
            "counters": self._counters(),
            "ui_rebuild_retries": self.rebuild_retries,
        }
        return {
            "service": {"s": service},
            "nodes": self.nodes,
            "gpus": self._gpus,
            "jobs": self._jobs,
            "plan": self._plan,
            "progress": progress,
            "rounds": self._rounds,
        }

    def _rebuild_slow(self, stored: bool, decided: bool) -> None:
        """What changes at events: the jobs' rows (when the state file changed; a job
        whose row did not change keeps its value object), and the decider's view of the
        live jobs (``plan``: rates, allocation, why it waits; all of them when the decider
        moved, else those whose row changed)."""
        facts = self.reader.facts
        if stored:
            gpus: dict[str, list[list[int]]] = {k: [] for k in self.gpu_keys}
            for job_id, parts in facts.held:
                for node, ids, milli in parts:
                    for g in ids:
                        gpus.setdefault(f"{node}.{g}", []).append([job_id, milli])
            self._gpus = gpus
            cache = self._job_cache
            self._job_cache = {}
            for job in (*facts.live, *facts.ended):
                known = cache.get(job.id)
                value = known[1] if known is not None and known[0] is job else self._job(job)
                self._job_cache[job.id] = (job, value)
            self._jobs = {str(i): v for i, (_, v) in self._job_cache.items()}
        same_jobs = len(facts.live) == len(self._live_of) and all(
            a is b for a, b in zip(facts.live, self._live_of, strict=True)
        )
        if decided or not same_jobs:
            self._live = self._arrays(facts.live)
            self._live_of = facts.live
        cache = {} if decided else self._plan_cache
        self._plan_cache = {}
        for i, job in enumerate(facts.live):
            known = cache.get(job.id)
            value = known[1] if known is not None and known[0] is job else self._planned(job, i)
            self._plan_cache[job.id] = (job, value)
        self._plan = {str(i): v for i, (_, v) in self._plan_cache.items()}
        self._rounds = {
            str(i): {"start": _r(c.start_s, 2), "end": _r(self.round_ends.get(i, math.nan), 2),
                     "cells": c.cells}
            for i, c in self.history.items()
        }  # fmt: skip

    def _counters(self) -> dict[str, int]:
        driver = self.service.driver
        if driver is None:
            return {}
        c, p = driver.counters, driver.process_counters
        return {
            "leases_launched": p.launches,
            "lease_extensions": c.extensions,
            "lease_stops": p.stops,
            "leases_lost": p.lost,
            "job_retries": p.retries,
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

    def _arrays(self, live: tuple[JobFacts, ...]) -> _LiveArrays:
        """The live jobs' rates, allocation and what rho needs, as arrays (one row per
        live job, in ``live`` order)."""
        driver = self.service.driver
        n, t = len(live), len(self.models)
        arrays = _LiveArrays.zeros(n, t)
        if driver is None or not n:
            return arrays
        decider = self.service.decider
        table = decider.jobs
        row_of = driver.row_of.copy()
        rows = np.array([row_of.get(j.id, -1) for j in live], dtype=np.int64)
        known = (rows >= 0) & (rows < len(table.rates))
        arrays.known[:] = known
        arrays.rates[known] = table.rates[rows[known]]
        arrays.demand_gpus[known] = table.demand_milli[rows[known]] / MILLI_PER_GPU
        ent = decider.book.entities
        if ent is not None:
            x_of = self._allocation_rows(ent)
            e = np.array([x_of.get(int(r), -1) for r in rows.tolist()], dtype=np.int64)
            has = e >= 0
            arrays.in_allocation[:] = has
            arrays.x[has] = ent.x[e[has]]
            credit = decider.book.credit_s
            arrays.received_s[has] = np.maximum(ent.time[e[has]] - credit, 0.0)
        arrays.effective[:] = (arrays.x * arrays.rates).sum(axis=1)
        arrays.alone[:] = arrays.rates.max(axis=1) if t else 0.0
        arrays.steps[:] = [j.steps for j in live]
        arrays.submitted[:] = [j.submitted_at for j in live]
        arrays.steps_done[:] = [j.steps_done for j in live]
        arrays.lease_ids = [j.lease_id for j in live]
        arrays.ids = [str(j.id) for j in live]
        measured = driver.meter.is_measured
        arrays.measured = [[measured(j.id, k) for k in range(t)] for j in live]
        arrays.lists = (
            np.round(arrays.rates, 3).tolist(),
            np.round(arrays.x, 3).tolist(),
            np.round(arrays.received_s, 1).tolist(),
            np.round(arrays.effective, 4).tolist(),
        )
        return arrays

    def _progress(self, now: float) -> tuple[dict[str, list[float | None]], np.ndarray]:
        """Per live job ``[steps done, rho]`` now, and the finite rhos. rho, Themis'
        finish-time fairness as an estimate: (time in the system so far + remaining steps
        at the allocation's rate) / (its steps alone on its fastest model x max(1, n x
        g / C)), n the live jobs, g its GPUs, C the cluster's GPUs (results/fairness.py
        defines the same for finished jobs, with n averaged over the job's life)."""
        a = self._live
        if not len(a.ids):
            return {}, np.zeros(0)
        done = a.steps_done.copy()
        table = self.service.table
        for i, lease_id in enumerate(a.lease_ids):
            if lease_id is not None:
                lease = table.get(lease_id)
                if lease is not None:
                    done[i] = lease.steps
        left = np.maximum(a.steps - done, 0.0)
        n_live = len(a.ids)
        with np.errstate(divide="ignore", invalid="ignore"):
            t_fair = a.steps / a.alone * np.maximum(1.0, n_live * a.demand_gpus / self.total_gpus)
            rho = ((now - a.submitted) + left / a.effective) / t_fair
        ok = a.known & (a.alone > 0) & (a.effective > 0) & np.isfinite(rho)
        rho_r = np.where(ok, np.round(rho, 2), np.nan)
        done_r = np.round(done, 1).tolist()
        out = {
            k: [d, None if r != r else r]
            for k, d, r in zip(a.ids, done_r, rho_r.tolist(), strict=True)
        }
        return out, rho[ok]

    def _allocation_rows(self, ent: Any) -> dict[int, int]:
        """row -> entity index of single jobs in the allocation in force (cached per
        table: a solve makes a new one)."""
        cached_for, rows = self._entity_rows
        if cached_for is ent:
            return rows
        singles = np.flatnonzero(ent.rows_b < 0)
        rows_a = ent.rows_a[singles].tolist()
        rows = {int(r): int(e) for e, r in zip(singles.tolist(), rows_a, strict=True)}
        self._entity_rows = (ent, rows)
        return rows

    def _job(self, job: JobFacts) -> dict[str, Any]:
        """The job as stored."""
        return {
            "name": job.name,
            "state": job.state,
            "steps": _count(job.steps),
            "done": _count(job.steps_done),
            "gpus": job.num_gpu,
            "milli": job.gpu_milli,
            "type": job.gpu_type if _held_a_gpu(job) else None,
            "index": job.gpu_index if _held_a_gpu(job) else None,
            "attained_s": _r(job.attained_s, 1),
            "attempts": job.attempts,
            "submitted": _r(job.submitted_at, 2),
            "started": None if job.started_at is None else _r(job.started_at, 2),
            "finished": None if job.finished_at is None else _r(job.finished_at, 2),
            "reason": job.reason,
        }

    def _planned(self, job: JobFacts, i: int) -> dict[str, Any]:
        """A live job as the decider sees it: rates per model (measured or prior), the
        allocation and what it received, the allocation's steps/s, why it waits."""
        a = self._live
        out: dict[str, Any] = {}
        if a.known[i]:
            rates, x, got, eff = a.lists
            out["rates"] = rates[i]
            out["measured"] = a.measured[i]
            out["eff"] = eff[i]
            if a.in_allocation[i]:
                out["x"] = x[i]
                out["got_s"] = got[i]
            out["measuring"] = self._measuring(job, a.measured[i], out.get("x"))
        if job.state == "queued":
            out["why"] = self._why(job, out)
        return out

    def _measuring(self, job: JobFacts, measured: list[bool], x: list[float] | None) -> bool:
        """Whether the rate an estimated finish would use is still a prior (a placeholder
        1 step/s gave "578d 16h"): the page then says "measuring", not an estimate. A
        running job: the rate on the GPU model it holds; a queued one: every model its
        allocation gives it time on."""
        if job.state == "running":
            k = self.models.index(job.gpu_type) if job.gpu_type in self.models else -1
            return k >= 0 and not measured[k]
        given = [ok for share, ok in zip(x or [], measured, strict=False) if share > 0]
        return bool(given) and not any(given)  # no GPU time at all: no estimate ('-')

    def _why(self, job: JobFacts, shown: dict[str, Any]) -> str:
        """Why a queued job is not running this round, from the decider's state."""
        driver = self.service.driver
        if job.cancel_requested:
            return "cancel requested: leaves at its process's end"
        if job.attempts > 0 and job.reason:
            # It failed, and waits to be retried (not merely for its turn): say so and why.
            return (
                f"failing: {job.reason}; retried from its last checkpoint when the policy "
                "next gives it GPU time (gpumosaic logs ID shows its output)"
            )
        if driver is None:
            return "the round loop has not started"
        if job.id not in driver.row_of:
            return "submitted during this round: admitted at the next round boundary"
        if job.id in driver.pending:
            return "planned for this round: starts once its previous process has stopped"
        x = shown.get("x")
        if x is None:
            return "not in the allocation in force yet: the policy solves at the next boundary"
        if not any(v and v > 0 for v in x):
            return "the policy gives it no GPU time now (allocation 0 on every GPU model)"
        parts = []
        for name, share, got in zip(self.models, x, shown.get("got_s") or [], strict=False):
            if share:
                parts.append(f"{name} {share:.0%}" + (f" (got {got:g} s)" if got else ""))
        return (
            "waits its turn: allocated " + ", ".join(parts) + " of a GPU's time; "
            "jobs further behind their allocation ran first"
        )


@dataclass(slots=True)
class _LiveArrays:
    """The live jobs' numbers the page computes with, one row per live job."""

    ids: list[str]
    lease_ids: list[str | None]
    known: np.ndarray  # admitted by the decider (its rates and row exist)
    in_allocation: np.ndarray
    rates: np.ndarray  # (n, T) steps/s estimates (measured or prior)
    measured: list[list[bool]]
    x: np.ndarray  # (n, T) the policy's allocation
    received_s: np.ndarray  # (n, T) seconds received since the last solve
    effective: np.ndarray  # steps/s the allocation gives: sum over models of x * rate
    alone: np.ndarray  # steps/s on its fastest model
    demand_gpus: np.ndarray
    steps: np.ndarray
    steps_done: np.ndarray  # as stored (running jobs: the lease's live count replaces it)
    submitted: np.ndarray
    # rates, x, received_s (rounded, per row) and effective, as Python lists
    lists: tuple[list[Any], list[Any], list[Any], list[Any]] = ([], [], [], [])

    @classmethod
    def zeros(cls, n: int, t: int) -> _LiveArrays:
        z = np.zeros
        return cls([], [], z(n, dtype=bool), z(n, dtype=bool), z((n, t)), [], z((n, t)),
                   z((n, t)), z(n), z(n), z(n), z(n), z(n), z(n))  # fmt: skip

    @classmethod
    def empty(cls) -> _LiveArrays:
        return cls.zeros(0, 0)


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
    # The user's (the service's) token only: a job's own token does not open the page.
    token = str(svc.config.token)
    return ui_routes(rounds_feed(svc, interval_s), "rounds", "gpumosaic serve", lambda: token)
