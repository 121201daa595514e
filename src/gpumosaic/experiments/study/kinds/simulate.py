"""Run kind ``simulate``: one ``gpumosaic simulate`` run per grid point.

``run_description`` is the ONE place where a study's grid point becomes the validated run
description that ``simulate`` itself uses (``run.description.RunDescription``, run by
``run.build.run``); every point is validated through it before any run starts and every
run goes through it, so the numbers are those of ``simulate`` with the same options.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import PositiveFloat, PositiveInt

from gpumosaic.errors import InputError
from gpumosaic.experiments.study.kinds.base import (
    TIME_AXIS,
    GridError,
    GridModel,
    NamedTable,
    RunProduct,
    unique,
)
from gpumosaic.results.summary_value import Summary
from gpumosaic.run.description import RunDescription

if TYPE_CHECKING:  # a study file is checked without them (numpy, Parquet, the simulators)
    import pyarrow as pa

    from gpumosaic.results.result import SimResult

LOAD_PLACEHOLDER = "{load}"


class SimulateGrid(GridModel):
    cluster: tuple[str, ...]
    workload: tuple[str, ...]
    policy: tuple[str, ...] = ("fifo",)
    placement: tuple[str, ...] = ("default",)  # "default": the mechanism's own default
    seed: tuple[int, ...] = (0,)
    gpus_per_node: tuple[PositiveInt, ...] = (1,)
    mechanism: tuple[str, ...] = ("auto",)
    backfill: tuple[bool, ...] = (True,)
    round_s: tuple[PositiveFloat, ...] = (360.0,)
    resolve_interval_s: tuple[PositiveFloat, ...] = (1920.0,)
    sharing: tuple[str, ...] = ("none",)
    # Offered load, written into the cluster and workload specs where they say {load}
    # (e.g. workload = "gavel:rate={load},window=4000-5000").
    load: tuple[float, ...] = ()
    # The cluster pre-filled before the first job arrives (simulate --background).
    background: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SimulatePoint:
    cluster: str
    workload: str
    policy: str
    placement: str
    seed: int
    gpus_per_node: int
    mechanism: str
    backfill: bool
    round_s: float
    resolve_interval_s: float
    sharing: str
    load: float | None
    background: str | None = None

    ID_OMITS_WHEN_NONE: ClassVar[tuple[str, ...]] = ("background",)


def run_description(point: SimulatePoint) -> RunDescription:
    """The run description of one grid point (the one adapter to ``run.build.run``)."""
    return RunDescription(
        cluster=_with_load(point.cluster, point.load),
        workload=_with_load(point.workload, point.load),
        policy=point.policy,
        placement=None if point.placement == "default" else point.placement,
        seed=point.seed,
        gpus_per_node=point.gpus_per_node,
        mechanism=point.mechanism,
        backfill=point.backfill,
        round_s=point.round_s,
        resolve_interval_s=point.resolve_interval_s,
        sharing=point.sharing,
        background=point.background,
    )


def _with_load(spec: str, load: float | None) -> str:
    return spec if load is None else spec.replace(LOAD_PLACEHOLDER, f"{load:g}")


class SimulateKind:
    name: ClassVar[str] = "simulate"
    grid_model: ClassVar[type[GridModel]] = SimulateGrid
    metrics_type: ClassVar[type] = Summary
    default_metrics: ClassVar[tuple[str, ...]] = (
        "avg_jct_s",
        "p99_jct_s",
        "makespan_s",
        "utilization",
        "fragmentation_rate_mean",
        "energy_kwh",
    )

    def points(self, grid: Any) -> list[SimulatePoint]:
        g: SimulateGrid = grid
        loads: list[float | None] = list(g.load) or [None]
        backgrounds: list[str | None] = list(g.background) or [None]
        axes = (
            g.cluster, g.workload, g.policy, g.placement, g.seed, g.gpus_per_node, g.mechanism,
            g.backfill, g.round_s, g.resolve_interval_s, g.sharing, loads, backgrounds,
        )  # fmt: skip
        return unique(
            [SimulatePoint(*values) for values in itertools.product(*axes)]  # type: ignore[arg-type]
        )

    def check(self, grid: Any) -> None:
        from gpumosaic.workloads.spec import parse_cluster

        g: SimulateGrid = grid
        if g.load and not any(LOAD_PLACEHOLDER in s for s in (*g.workload, *g.cluster)):
            raise GridError("load", "a load axis needs {load} in a workload or cluster spec")
        for gpus in g.gpus_per_node:
            for cluster in g.cluster:
                for load in g.load or [None]:
                    _as_grid_error("cluster", lambda c=cluster, n=gpus, x=load: parse_cluster(
                        _with_load(c, x), n))  # fmt: skip
        gandiva = any(s.strip().lower().startswith("gandiva") for s in g.sharing)
        for placement in g.placement:
            if placement != "default":
                _as_grid_error("placement", lambda p=placement: _check_placement(p, gandiva))
        from gpumosaic.policies.ordering import QUEUE_ORDERS
        from gpumosaic.policies.registry import POLICY_NAMES

        known = dict.fromkeys((*QUEUE_ORDERS, *POLICY_NAMES))
        for policy in g.policy:
            if policy.lower() not in known and policy not in known:
                raise GridError("policy", f"unknown policy {policy!r} (known: {', '.join(known)})")
        # Every point through the run description simulate itself validates with: its
        # error names the CLI option, whose field is the grid key (--round-s: round_s);
        # each cluster and workload once through the parsers its runs use (no numpy).
        inputs_checked: set[tuple[str, str, int]] = set()
        for point in self.points(grid):
            try:
                description = run_description(point)
                inputs = (description.cluster, description.workload, description.gpus_per_node)
                if inputs not in inputs_checked:
                    _check_inputs(description)
                    inputs_checked.add(inputs)
            except InputError as err:
                axis = (err.field or "").removeprefix("--").replace("-", "_")
                if axis not in SimulateGrid.model_fields:
                    raise GridError("", str(err)) from None
                raise GridError(axis, err.message) from None

    def batch_key(self, point: Any) -> Hashable:
        return point

    def run(self, points: Sequence[Any]) -> list[RunProduct]:
        return [run_point(p) for p in points]


def _as_grid_error(axis: str, check: Any) -> None:
    try:
        check()
    except (InputError, ValueError) as err:
        raise GridError(axis, getattr(err, "message", str(err))) from None


def _check_inputs(description: RunDescription) -> None:
    """The point's cluster and workload (``RunDescription.check_inputs``); a job list's
    own error (its file, row and column) is the workload axis's."""
    try:
        description.check_inputs()
    except InputError as err:
        if not (err.field or "").startswith("--"):
            raise GridError("workload", str(err)) from None
        raise


def _check_placement(name: str, gandiva: bool) -> None:
    """The placement grammar's own check (no scorer, no numpy: a mistake's one line)."""
    from gpumosaic.placement.registry import check_placement_for

    if name.strip().lower() == GANDIVA_ORDER:
        if not gandiva:
            raise ValueError("affinity is Gandiva's own server order: only with sharing gandiva")
        return
    check_placement_for(name, field="placement")


# Gandiva's own server order (mechanisms/gandiva/plugin.py: the name its ranking registers).
GANDIVA_ORDER = "affinity"


def run_point(point: SimulatePoint) -> RunProduct:
    from gpumosaic.kernel_cache import kernels_ran
    from gpumosaic.run.build import run

    request = run_description(point)
    outcome = run(request)
    result = outcome.result
    notes = list(outcome.never_fit_lines)
    if result.stats.policy_fallbacks:
        notes.append(f"policy solver fell back {result.stats.policy_fallbacks} times")
    tables = [
        NamedTable("jobs", jobs_table(result)),
        NamedTable("timeline", timeline_table(result)),
    ]
    placements = placements_table(result, request)
    if placements is not None:
        tables.append(NamedTable("placements", placements))
    description = {"kind": "simulate", "request": request.to_json(), "load": point.load,
                   "cluster_gpus": result.total_gpu_milli // 1000,
                   "kernels": kernels_ran()}  # fmt: skip
    return RunProduct(point, outcome.summary, description, tuple(tables), TIME_AXIS, tuple(notes))


def jobs_table(result: SimResult) -> pa.Table:
    """The one per-job table (``metrics.columns.job_table``; placements.parquet has every
    GPU each job held)."""
    import pyarrow as pa

    from gpumosaic.results.columns import job_table

    return pa.table(job_table(result.records))


def timeline_table(result: SimResult) -> pa.Table:
    import pyarrow as pa

    t = result.timeline
    return pa.table(
        {
            "time_s": t.time_s,
            "allocated_milli": t.allocated_milli,
            "allocation_rate": t.allocated_milli / max(result.total_gpu_milli, 1),
            "running": t.running,
            "queued": t.queued,
            "fragmentation_rate": t.fragmentation_rate,
            "power_gpu_w": t.power_gpu_w,
            "power_cpu_w": t.power_cpu_w,
        }
    )


def placements_table(result: SimResult, request: RunDescription) -> pa.Table | None:
    """One row per (job, GPU) it held: the occupancy mosaic's input. None when this
    simulator does not record placements (rounds re-place jobs every round)."""
    placed = [r for r in result.records if r.placement]
    if not placed:
        return None
    import numpy as np
    import pyarrow as pa

    from gpumosaic.workloads.spec import parse_cluster

    cluster = parse_cluster(request.cluster, request.gpus_per_node)
    offset = np.concatenate([[0], np.cumsum([n.num_gpus for n in cluster.nodes])])
    rows = [
        (r.job_id, node, int(offset[node] + g), r.gpu_milli, r.start_s,
         r.finish_s if not np.isnan(r.finish_s) else result.end_s)
        for r in placed
        for node, gpus in r.placement
        for g in gpus
    ]  # fmt: skip
    job, node, gpu, milli, start, end = (list(c) for c in zip(*rows, strict=True))
    return pa.table(
        {"job_id": job, "node": node, "gpu": gpu, "milli": milli, "start": start, "end": end}
    )
