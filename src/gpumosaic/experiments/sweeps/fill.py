"""Many fill replays (placements x seeds) in parallel processes, and their summaries.

Each worker process loads the node and task lists once (from their specs, so only short
strings cross process boundaries on the way in) and returns FillResults.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from gpumosaic.experiments.parallel import default_workers, parallel_map
from gpumosaic.mechanisms.fill.simulator import FillResult
from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.job import JobSpec
from gpumosaic.run.fill import fill_replay
from gpumosaic.traces.openb import load_openb_nodes, load_openb_tasks

TABLE_POINTS_PCT = (90.0, 100.0, 110.0, 130.0)


@dataclass(frozen=True, slots=True)
class FillRunSpec:
    placement: str
    seed: int
    tasks: str
    nodes: str
    inflate: float


@dataclass(frozen=True, slots=True)
class FillSummaryRow:
    """Mean and sample standard deviation over seeds at one arrived-workload point."""

    placement: str
    arrived_pct: float
    seeds: int
    allocation_rate_mean: float
    allocation_rate_sd: float
    fragmentation_rate_mean: float
    fragmentation_rate_sd: float
    power_w_mean: float
    power_w_sd: float


@lru_cache(maxsize=4)
def _inputs(nodes: str, tasks: str) -> tuple[ClusterSpec, tuple[JobSpec, ...]]:
    return load_openb_nodes(nodes), tuple(load_openb_tasks(tasks))


def run_one(spec: FillRunSpec) -> FillResult:
    cluster, jobs = _inputs(spec.nodes, spec.tasks)
    return fill_replay(cluster, jobs, spec.placement, spec.seed, spec.inflate)


def run_fill_sweep(
    specs: Sequence[FillRunSpec],
    workers: int | None = None,
    on_done: Callable[[FillResult], None] | None = None,
) -> list[FillResult]:
    """Run every spec; results in the order of ``specs``. ``workers`` <= 1 runs inline."""
    workers = workers or default_workers()
    progress = None if on_done is None else lambda _done, _total, result: on_done(result)
    return parallel_map(run_one, specs, workers, progress)


def summarize(
    results: Sequence[FillResult], points_pct: Sequence[float] = TABLE_POINTS_PCT
) -> list[FillSummaryRow]:
    """One row per placement (in first-seen order) and point."""
    rows: list[FillSummaryRow] = []
    for placement in dict.fromkeys(r.placement for r in results):
        runs = [r for r in results if r.placement == placement]
        for pct in points_pct:
            at = [r.at_arrived(pct) for r in runs]
            alloc = np.array([p.allocation_rate_pct for p in at])
            frag = np.array([p.fragmentation_rate_pct for p in at])
            power = np.array([p.power_w for p in at])
            rows.append(
                FillSummaryRow(
                    placement,
                    pct,
                    len(runs),
                    float(alloc.mean()),
                    _sd(alloc),
                    float(frag.mean()),
                    _sd(frag),
                    float(power.mean()),
                    _sd(power),
                )
            )
    return rows


def _sd(values: npt.NDArray[np.float64]) -> float:
    return float(values.std(ddof=1)) if len(values) > 1 else 0.0
