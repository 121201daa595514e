"""Run kind ``gavel``: Gavel's simulator experiments as ``reproduce gavel`` runs them
(``experiments/reproductions/gavel.py``): the static trace or the continuous stream, on the round
mechanism, with Gavel's shipped fifo/gandiva policies available by name."""

from __future__ import annotations

import itertools
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from gpumosaic.experiments.reproductions.gavel import (
    CONTINUOUS_CLUSTER,
    SHIPPED,
    STATIC_CLUSTER,
    continuous_workload,
    repro_figures,
    simulate_rounds,
    static_workload,
)
from gpumosaic.experiments.study.kinds.base import (
    TIME_AXIS,
    GridError,
    GridModel,
    NamedTable,
    RunProduct,
    unique,
)
from gpumosaic.experiments.study.kinds.simulate import jobs_table, timeline_table
from gpumosaic.model.cluster import ClusterSpec


class GavelGrid(GridModel):
    part: tuple[Literal["static", "continuous"], ...]
    policy: tuple[str, ...]
    rate: tuple[float, ...] = (0.0,)  # jobs/hr (continuous)
    seed: tuple[int, ...] = (0,)
    jobs_source: tuple[Literal["gavel", "gpumosaic"], ...] = ("gavel",)
    placement: tuple[str, ...] = ("strided",)


@dataclass(frozen=True, slots=True)
class GavelPoint:
    part: str
    policy: str
    rate: float
    seed: int
    jobs_source: str
    placement: str


@dataclass(frozen=True, slots=True)
class GavelMetrics:
    """``reproduce gavel``'s numbers: avg JCT and makespan of the measured jobs, hours."""

    avg_jct_h: float
    makespan_h: float
    completed: int
    rounds: int
    policy_solves: int
    policy_solve_s: float
    policy_fallbacks: int
    elapsed_s: float
    cpu_s: float


class GavelKind:
    name: ClassVar[str] = "gavel"
    grid_model: ClassVar[type[GridModel]] = GavelGrid
    metrics_type: ClassVar[type] = GavelMetrics
    default_metrics: ClassVar[tuple[str, ...]] = ("avg_jct_h", "makespan_h", "cpu_s")

    def points(self, grid: Any) -> list[GavelPoint]:
        g: GavelGrid = grid
        out = []
        for part, policy, rate, seed, source, placement in itertools.product(
            g.part, g.policy, g.rate, g.seed, g.jobs_source, g.placement
        ):
            if part == "static":  # one trace: no rate, no job source
                out.append(GavelPoint(part, policy, 0.0, seed, "trace", placement))
            else:
                out.append(GavelPoint(part, policy, float(rate), seed, source, placement))
        return unique(out)

    def check(self, grid: Any) -> None:
        from gpumosaic.policies.registry import POLICY_NAMES

        g: GavelGrid = grid
        known = (*POLICY_NAMES, *SHIPPED)
        for policy in g.policy:
            if policy not in known:
                raise GridError("policy", f"unknown policy {policy!r} (known: {', '.join(known)})")
        if "continuous" in g.part and not all(r > 0 for r in g.rate):
            raise GridError("rate", "the continuous part needs rates > 0 jobs/hr")

    def batch_key(self, point: Any) -> Hashable:
        return point

    def run(self, points: Sequence[Any]) -> list[RunProduct]:
        return [run_point(p) for p in points]


def run_point(point: GavelPoint) -> RunProduct:
    """What ``reproductions.gavel._row`` does, keeping the run's records for the store."""
    if point.part == "static":
        cluster = ClusterSpec.from_counts(STATIC_CLUSTER, gpus_per_node=1)
        workload = static_workload()
    else:
        cluster = ClusterSpec.from_counts(CONTINUOUS_CLUSTER, gpus_per_node=1)
        workload = continuous_workload(point.rate, point.seed, point.jobs_source)
    cpu0 = time.process_time()
    model_counts = STATIC_CLUSTER if point.part == "static" else CONTINUOUS_CLUSTER
    result = simulate_rounds(
        cluster, model_counts, workload, point.policy, point.placement, point.seed
    )
    cpu = time.process_time() - cpu0
    jct, makespan, completed = repro_figures(result)
    stats = result.stats
    metrics = GavelMetrics(
        avg_jct_h=jct,
        makespan_h=makespan,
        completed=completed,
        rounds=stats.rounds,
        policy_solves=stats.policy_solves,
        policy_solve_s=stats.policy_solve_s,
        policy_fallbacks=stats.policy_fallbacks,
        elapsed_s=stats.elapsed_s,
        cpu_s=cpu,
    )
    counts = ",".join(f"{m}:{n}" for m, n in model_counts)
    description = {"kind": "gavel", "cluster": counts, "workload": workload.name,
                   "part": point.part, "policy": point.policy, "rate": point.rate,
                   "seed": point.seed, "jobs_source": point.jobs_source,
                   "placement": point.placement, "mechanism": "rounds"}  # fmt: skip
    notes = (
        (f"policy solver fell back {stats.policy_fallbacks} times",)
        if stats.policy_fallbacks
        else ()
    )
    tables = (
        NamedTable("jobs", jobs_table(result)),
        NamedTable("timeline", timeline_table(result)),
    )
    return RunProduct(point, metrics, description, tables, TIME_AXIS, notes)
