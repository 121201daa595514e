"""Run kind ``fill``: the FGD/PWR "fill the cluster" replay of ``gpumosaic fill`` (and
``compare --mode fill``), one placement and seed per run, with every task's fate stored."""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
from pydantic import PositiveFloat

from gpumosaic.experiments.study.kinds.base import (
    ARRIVED_AXIS,
    GridError,
    GridModel,
    NamedTable,
    RunProduct,
    unique,
)
from gpumosaic.experiments.sweeps.fill import TABLE_POINTS_PCT, _inputs
from gpumosaic.mechanisms.fill.simulator import FAIL_REASONS, FillResult, kind_label
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import Assignment
from gpumosaic.run.fill import fill_replay


class FillGrid(GridModel):
    tasks: tuple[str, ...] = ("openb:default",)
    nodes: tuple[str, ...] = ("openb:gpu",)
    placement: tuple[str, ...]
    seed: tuple[int, ...] = (42,)
    inflate: tuple[PositiveFloat, ...] = (1.3,)


@dataclass(frozen=True, slots=True)
class FillPoint:
    tasks: str
    nodes: str
    placement: str
    seed: int
    inflate: float


@dataclass(frozen=True, slots=True)
class FillMetrics:
    """The fill table's numbers (``compare --mode fill``) at 90/100/110/130% arrived, and
    the end of the replay. Rates in % (allocation: of cluster GPUs; fragmentation rate:
    of free GPU milli; fragmentation: of cluster GPUs)."""

    allocation_rate_pct_90: float
    allocation_rate_pct_100: float
    allocation_rate_pct_110: float
    allocation_rate_pct_130: float
    fragmentation_rate_pct_90: float
    fragmentation_rate_pct_100: float
    fragmentation_rate_pct_110: float
    fragmentation_rate_pct_130: float
    fragmentation_pct_90: float
    power_kw_90: float
    power_kw_100: float
    power_kw_110: float
    power_kw_130: float
    arrived_pct_final: float
    allocation_rate_pct_final: float
    num_tasks: int
    failed_tasks: int
    elapsed_s: float
    cpu_s: float


def fill_metrics(result: FillResult) -> FillMetrics:
    at = {p: result.at_arrived(p) for p in TABLE_POINTS_PCT}
    final = result.final
    values: dict[str, float | int] = {}
    for p, point in at.items():
        values[f"allocation_rate_pct_{p:.0f}"] = point.allocation_rate_pct
        values[f"fragmentation_rate_pct_{p:.0f}"] = point.fragmentation_rate_pct
        values[f"power_kw_{p:.0f}"] = point.power_w / 1000.0
    return FillMetrics(
        **values,
        fragmentation_pct_90=at[90.0].fragmentation_pct,
        arrived_pct_final=final.arrived_pct,
        allocation_rate_pct_final=final.allocation_rate_pct,
        num_tasks=result.num_tasks,
        failed_tasks=int(result.failed.sum()),
        elapsed_s=result.elapsed_s,
        cpu_s=result.cpu_s,
    )


class FillKind:
    name: ClassVar[str] = "fill"
    grid_model: ClassVar[type[GridModel]] = FillGrid
    metrics_type: ClassVar[type] = FillMetrics
    default_metrics: ClassVar[tuple[str, ...]] = (
        "allocation_rate_pct_100",
        "allocation_rate_pct_130",
        "fragmentation_rate_pct_90",
        "power_kw_100",
    )

    def points(self, grid: Any) -> list[FillPoint]:
        g: FillGrid = grid
        axes = (g.tasks, g.nodes, g.placement, g.seed, g.inflate)
        return unique([FillPoint(*values) for values in itertools.product(*axes)])

    def check(self, grid: Any) -> None:
        from gpumosaic.errors import InputError
        from gpumosaic.placement.workload import TargetWorkload
        from gpumosaic.run.parts import build_placement_for

        g: FillGrid = grid
        for nodes in g.nodes:
            for tasks in g.tasks:
                try:
                    _, jobs = _inputs(nodes, tasks)
                except InputError as err:
                    axis = "nodes" if "node" in str(err).lower() else "tasks"
                    raise GridError(axis, str(err)) from None
                workload = TargetWorkload.from_jobs(jobs)
                for placement in g.placement:
                    try:
                        build_placement_for(placement, workload, field="placement")
                    except InputError as err:
                        raise GridError("placement", err.message) from None

    def batch_key(self, point: Any) -> Hashable:
        return point

    def run(self, points: Sequence[Any]) -> list[RunProduct]:
        return [run_point(p) for p in points]


def run_point(point: FillPoint) -> RunProduct:
    cluster, jobs = _inputs(point.nodes, point.tasks)
    tasks: list[JobSpec] = []
    where: list[Assignment | None] = []

    def keep(_index: int, task: JobSpec, assignment: Assignment | None) -> None:
        tasks.append(task)
        where.append(assignment)

    result = fill_replay(cluster, jobs, point.placement, point.seed, point.inflate, on_task=keep)
    offset = np.concatenate([[0], np.cumsum([n.num_gpus for n in cluster.nodes])])
    description = {"kind": "fill", "tasks": point.tasks, "nodes": point.nodes,
                   "placement": point.placement, "seed": point.seed, "inflate": point.inflate,
                   "cluster_gpus": cluster.num_gpus}  # fmt: skip
    tables = (
        NamedTable("jobs", _jobs_table(result, tasks, where, cluster)),
        NamedTable("timeline", _curve_table(result)),
        NamedTable("placements", _placements_table(result, where, offset)),
    )
    failed = ", ".join(f"{r.value}: {c}" for r, c in result.failed_by_reason())
    notes = (f"{int(result.failed.sum())} tasks failed ({failed})",) if failed else ()
    return RunProduct(point, fill_metrics(result), description, tables, ARRIVED_AXIS, notes)


def _jobs_table(
    result: FillResult, tasks: list[JobSpec], where: list[Assignment | None], cluster: Any
) -> pa.Table:
    reasons = [FAIL_REASONS[c].value if c >= 0 else "" for c in result.fail_reason.tolist()]
    return pa.table(
        {
            "job_id": list(range(len(tasks))),  # the replay's index (sampled copies repeat ids)
            "name": [t.name for t in tasks],
            "arrived_pct": result.arrived_pct,
            "num_gpu": [t.num_gpu for t in tasks],
            "gpu_milli": [t.gpu_milli for t in tasks],
            "cpu_milli": [t.cpu_milli for t in tasks],
            "kind": [kind_label(int(k)) for k in result.task_kind.tolist()],
            "status": ["rejected" if a is None else "running" for a in where],
            "reason": reasons,
            "node": [-1 if a is None else a.node for a in where],
            "gpus": pa.array([[] if a is None else list(a.gpus) for a in where],
                             type=pa.list_(pa.int32())),
            "gpu_model": ["" if a is None else cluster.nodes[a.node].gpu.name for a in where],
        }
    )  # fmt: skip


def _curve_table(result: FillResult) -> pa.Table:
    return pa.table(
        {
            "arrived_pct": result.arrived_pct,
            "allocation_rate_pct": result.allocation_rate_pct,
            "fragmentation_rate_pct": result.fragmentation_rate_pct,
            "fragmentation_pct": result.fragmentation_pct,
            "power_gpu_w": result.power_gpu_w,
            "power_cpu_w": result.power_cpu_w,
        }
    )


def _placements_table(
    result: FillResult, where: list[Assignment | None], offset: np.ndarray
) -> pa.Table:
    end = float(result.arrived_pct[-1])  # tasks never leave a fill replay
    rows = [
        (i, a.node, int(offset[a.node] + g), a.gpu_milli, float(result.arrived_pct[i]), end)
        for i, a in enumerate(where)
        if a is not None
        for g in a.gpus
    ]
    names = ("job_id", "node", "gpu", "milli", "start", "end")
    if not rows:
        return pa.table({n: pa.array([], type=pa.float64()) for n in names})
    return pa.table(dict(zip(names, (list(c) for c in zip(*rows, strict=True)), strict=True)))
