"""Run kind ``gandiva``: Gandiva's mechanisms on Gavel's generated workloads as
``gpumosaic reproduce gandiva`` runs them (scenario x variant).

The variants of one scenario and seed run together in one task: for an unbounded stream
the utilization window ends at the earliest end among the variants (``evaluate``), so a
variant's numbers depend on the others of its batch.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from gpumosaic.experiments.reproductions.gandiva import (
    QUICK_SCENARIOS,
    SCENARIOS,
    VARIANTS,
    Scenario,
    Variant,
    build,
    run_variant_result,
    window_of,
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
from gpumosaic.results.result import SimResult
from gpumosaic.workloads.throughputs import GavelThroughputTable


class GandivaGrid(GridModel):
    scenario: tuple[str, ...] = tuple(s.name for s in SCENARIOS)
    variant: tuple[str, ...] = tuple(v.name for v in VARIANTS)
    seed: tuple[int, ...] = (0,)
    quick: tuple[bool, ...] = (False,)


@dataclass(frozen=True, slots=True)
class GandivaPoint:
    scenario: str
    variant: str
    seed: int
    quick: bool


@dataclass(frozen=True, slots=True)
class GandivaMetrics:
    measured_done: int
    avg_jct_h: float
    end_h: float
    busy: float
    effective: float
    work_per_busy: float
    packs_kept: int
    packs_undone: int
    migrations: int
    suspended_share: float
    wall_s: float


class GandivaKind:
    name: ClassVar[str] = "gandiva"
    grid_model: ClassVar[type[GridModel]] = GandivaGrid
    metrics_type: ClassVar[type] = GandivaMetrics
    default_metrics: ClassVar[tuple[str, ...]] = (
        "avg_jct_h",
        "busy",
        "effective",
        "work_per_busy",
        "migrations",
    )

    def points(self, grid: Any) -> list[GandivaPoint]:
        g: GandivaGrid = grid
        axes = (g.scenario, g.variant, g.seed, g.quick)
        return unique([GandivaPoint(*values) for values in itertools.product(*axes)])

    def check(self, grid: Any) -> None:
        g: GandivaGrid = grid
        names = [s.name for s in SCENARIOS]
        for scenario in g.scenario:
            if scenario not in names:
                raise GridError("scenario", f"unknown scenario {scenario!r} (known: {names})")
        variants = [v.name for v in VARIANTS]
        for variant in g.variant:
            if variant not in variants:
                raise GridError("variant", f"unknown variant {variant!r} (known: {variants})")

    def batch_key(self, point: Any) -> Hashable:
        return (point.scenario, point.seed, point.quick)

    def run(self, points: Sequence[Any]) -> list[RunProduct]:
        first = points[0]
        scenario = _scenario(first.scenario, first.quick)
        table = GavelThroughputTable.load()
        variants = [next(v for v in VARIANTS if v.name == p.variant) for p in points]
        runs = [_run(scenario, v, table, first.seed, None) for v in variants]
        if scenario.jobs is None:  # a stream: again, over a window common to the batch
            _, workload = build(scenario, table, first.seed)
            start, _ = window_of(scenario, workload)
            end = min(r[0].end_h for r in runs) * 3600
            runs = [_run(scenario, v, table, first.seed, (start, end)) for v in variants]
        return [
            _product(point, scenario, row, result)
            for point, (row, result) in zip(points, runs, strict=True)
        ]


def _scenario(name: str, quick: bool) -> Scenario:
    return next(s for s in (QUICK_SCENARIOS if quick else SCENARIOS) if s.name == name)


def _run(
    scenario: Scenario,
    variant: Variant,
    table: GavelThroughputTable,
    seed: int,
    window_s: tuple[float, float] | None,
) -> tuple[Any, SimResult]:
    """``reproductions.gandiva.run_variant`` (through the road), keeping the run's records."""
    return run_variant_result(scenario, variant, table, seed, window_s)


def _product(point: GandivaPoint, scenario: Scenario, row: Any, result: SimResult) -> RunProduct:
    values = asdict(row)
    metrics = GandivaMetrics(**{k: values[k] for k in GandivaMetrics.__dataclass_fields__})
    description = {"kind": "gandiva", **asdict(point), "scenario_spec": asdict(scenario)}
    tables = (
        NamedTable("jobs", jobs_table(result)),
        NamedTable("timeline", timeline_table(result)),
    )
    return RunProduct(point, metrics, description, tables, TIME_AXIS)
