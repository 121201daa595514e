"""Run kind ``nvshare``: one cell of the nvshare thesis's two-job table as ``reproduce
nvshare`` computes it (``experiments/reproductions/nvshare.py``): a job pair under one setup."""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Literal

from pydantic import PositiveFloat

from gpumosaic.experiments.reproductions.nvshare import JOBS, _row, _with
from gpumosaic.experiments.study.kinds.base import GridError, GridModel, RunProduct, unique
from gpumosaic.model.gpu import gpu_model
from gpumosaic.sharing.nvshare import NvshareModel
from gpumosaic.sharing.paging import PagingModel

_DEFAULTS = NvshareModel()


class NvshareGrid(GridModel):
    job: tuple[str, ...] = JOBS
    setup: tuple[Literal["serial", "off", "on"], ...] = ("serial", "off", "on")
    tq_s: tuple[PositiveFloat, ...] = (1000.0, 60.0, 30.0)  # for setup "on" only
    link_gb_s: tuple[PositiveFloat, ...] = (_DEFAULTS.paging.link_gb_s,)
    fault_gb_s: tuple[PositiveFloat, ...] = (_DEFAULTS.paging.fault_gb_s,)
    sweep_s: tuple[PositiveFloat, ...] = (_DEFAULTS.paging.sweep_s,)
    handover_s: tuple[float, ...] = (_DEFAULTS.handover_s,)
    gpu_busy: tuple[float, ...] = (_DEFAULTS.gpu_busy,)
    gpu: tuple[str, ...] = ("P100",)


@dataclass(frozen=True, slots=True)
class NvsharePoint:
    job: str
    setup: str
    tq_s: float | None
    link_gb_s: float
    fault_gb_s: float
    sweep_s: float
    handover_s: float
    gpu_busy: float
    gpu: str


@dataclass(frozen=True, slots=True)
class NvshareMetrics:
    total_s: float  # completion time of both jobs
    handovers: int
    thrash_s: float
    lock_wait_s: float
    refill_s: float
    memory_pressure: float
    mean_slowdown: float


class NvshareKind:
    name: ClassVar[str] = "nvshare"
    grid_model: ClassVar[type[GridModel]] = NvshareGrid
    metrics_type: ClassVar[type] = NvshareMetrics
    default_metrics: ClassVar[tuple[str, ...]] = ("total_s", "handovers", "mean_slowdown")

    def points(self, grid: Any) -> list[NvsharePoint]:
        g: NvshareGrid = grid
        out = []
        for job, setup, tq, *physics in itertools.product(
            g.job, g.setup, g.tq_s, g.link_gb_s, g.fault_gb_s, g.sweep_s, g.handover_s,
            g.gpu_busy, g.gpu,
        ):  # fmt: skip
            tq_s = float(tq) if setup == "on" else None
            out.append(NvsharePoint(job, setup, tq_s, *physics))  # type: ignore[arg-type]
        return unique(out)

    def check(self, grid: Any) -> None:
        g: NvshareGrid = grid
        for job in g.job:
            if job not in JOBS:
                raise GridError("job", f"unknown job {job!r} (known: {', '.join(JOBS)})")
        for name in g.gpu:
            try:
                gpu_model(name)
            except (KeyError, ValueError) as err:
                raise GridError("gpu", str(err)) from None
        for point in self.points(grid):
            try:
                _model(point)
            except ValueError as err:
                raise GridError("gpu_busy", str(err)) from None

    def batch_key(self, point: Any) -> Hashable:
        return point

    def run(self, points: Sequence[Any]) -> list[RunProduct]:
        return [run_point(p) for p in points]


def _model(point: NvsharePoint) -> NvshareModel:
    base = NvshareModel(
        paging=PagingModel(
            link_gb_s=point.link_gb_s, fault_gb_s=point.fault_gb_s, sweep_s=point.sweep_s
        ),
        handover_s=point.handover_s,
        gpu_busy=point.gpu_busy,
    )
    # As reproduce_nvshare: serial and off keep the model's TQ, on takes the cell's.
    tq = point.tq_s if point.tq_s is not None else base.tq_s
    return _with(base, tq, point.setup != "off")


def run_point(point: NvsharePoint) -> RunProduct:
    row = _row(point.job, point.setup, point.tq_s, _model(point), gpu_model(point.gpu))
    metrics = NvshareMetrics(
        total_s=row.total_s,
        handovers=row.handovers,
        thrash_s=row.thrash_s,
        lock_wait_s=row.lock_wait_s,
        refill_s=row.refill_s,
        memory_pressure=row.memory_pressure,
        mean_slowdown=row.mean_slowdown,
    )
    return RunProduct(point, metrics, {"kind": "nvshare", **asdict(point)})
