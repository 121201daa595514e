"""Gavel's policy at Alibaba scale: max_min_fairness_perf, FGD vs strided, on openb.

The cluster is the openb node list (1,213 nodes, 6,212 GPUs, 7 GPU models); the jobs are
Gavel's generated single-GPU jobs with the spatial-sharing gpu_milli mix (20% 200, 20%
300, 25% 500, 15% 700, 20% 1000), Poisson arrivals, a window of jobs measured.

Gavel's table measures only V100, P100 and K80, so the other models get a documented
mapping (no profiles of them exist to feed ``workloads/estimation.py``); it lives in
``workloads/throughputs.py`` (``BORROWED_RATES``) and every ``gavel:`` workload uses it
unless ``borrow=off``:

=========  =====================  ==============================================
model      rates of               why
=========  =====================  ==============================================
V100M16/32 V100                   same GPU
P100       P100                   same GPU
T4         P100                   similar FP32 rate (8.1 vs 9.3 TFLOPS), 16 GB
A10, G2    V100                   G2 uses the A10 profile; A10 trains about as a V100
G3         V100 x 1.5             G3 uses the A100 profile; A100 ~1.5x V100 (FP32/TF32)
=========  =====================  ==============================================

``gpumosaic reproduce gavel-openb --rates 120,240 --window 100-130`` (a cluster
still filling); ``--rates 360,800 --window 4000-5000`` measures the steady state of the
reference note (docs/gavel.md has the numbers). One run of it is the command
``gpumosaic simulate --cluster openb:gpu --workload
gavel:rate=860,window=4000-5000,milli=spatial --policy max_min_fairness_perf --placement
fgd --seed 0 --json``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from gpumosaic.experiments.parallel import parallel_map
from gpumosaic.results.result import JobStatus
from gpumosaic.workloads.workload import Workload


@dataclass(frozen=True, slots=True)
class OpenbRun:
    placement: str
    rate_per_hour: float
    seed: int
    avg_jct_h: float
    completed: int
    utilization: float  # mean allocated milli / capacity over the measured span
    fragmentation_rate: float  # mean over the measured span
    rounds: int
    policy_solves: int
    policy_solve_s: float
    elapsed_s: float
    placement_failures: int  # placements a per-type milli count admitted but no GPU held


def openb_workload(rate: float, window: tuple[int, int], seed: int) -> Workload:
    """The ``gavel:rate=R,window=A-B,milli=spatial`` workload of ``gpumosaic simulate``
    (models Gavel never measured borrow ``BORROWED_RATES``)."""
    from gpumosaic.workloads.spec import parse_workload

    spec = f"gavel:rate={rate:g},window={window[0]}-{window[1]},milli=spatial"
    return parse_workload(spec, seed).workload


def run_openb(placement: str, rate: float, window: tuple[int, int], seed: int) -> OpenbRun:
    from gpumosaic.experiments.reproductions.gavel import simulate_rounds
    from gpumosaic.traces.openb import load_openb_nodes

    cluster = load_openb_nodes("openb:gpu")
    workload = openb_workload(rate, window, seed)
    result = simulate_rounds(
        cluster, "openb:gpu", workload, "max_min_fairness_perf", placement, seed
    )
    measured = [r for r in result.records if r.measured]
    done = [r for r in measured if r.status is JobStatus.COMPLETED]
    start = min(r.arrival_s for r in measured)
    end = max(r.finish_s for r in done) if done else result.end_s
    tl = result.timeline
    span = (tl.time_s >= start) & (tl.time_s <= end)
    weights = np.diff(np.append(tl.time_s, result.end_s))[span]
    util = tl.allocated_milli[span] / result.total_gpu_milli
    frag = tl.fragmentation_rate[span]
    return OpenbRun(
        placement=placement,
        rate_per_hour=rate,
        seed=seed,
        avg_jct_h=float(np.mean([r.jct_s for r in done])) / 3600.0 if done else float("nan"),
        completed=len(done),
        utilization=float(np.average(util, weights=weights)) if weights.sum() else float("nan"),
        fragmentation_rate=float(np.average(frag, weights=weights))
        if weights.sum()
        else float("nan"),
        rounds=result.stats.rounds,
        policy_solves=result.stats.policy_solves,
        policy_solve_s=result.stats.policy_solve_s,
        elapsed_s=result.stats.elapsed_s,
        placement_failures=result.leases.placement_failures if result.leases else 0,
    )


def _task(args: tuple[str, float, tuple[int, int], int]) -> OpenbRun:
    return run_openb(*args)


def run_openb_sweep(
    placements: Sequence[str],
    rates: Sequence[float],
    window: tuple[int, int],
    seed: int | Sequence[int] = 0,
    workers: int = 2,
    on_done: Callable[[int, int, OpenbRun], None] | None = None,
) -> list[OpenbRun]:
    """Every (rate, placement, seed) run, in that order; ``on_done`` as runs finish.
    ``seed`` is one seed or several (each point of the table then has its spread)."""
    seeds = [seed] if isinstance(seed, int) else list(seed)
    tasks = [(p, float(r), window, s) for r in rates for p in placements for s in seeds]
    return parallel_map(_task, tasks, workers, on_done)


@dataclass(frozen=True, slots=True)
class OpenbPoint:
    """One (placement, rate) point over its seeds: mean and the range (min, max)."""

    placement: str
    rate_per_hour: float
    seeds: tuple[int, ...]
    avg_jct_h: tuple[float, float, float]  # mean, min, max over seeds
    utilization: tuple[float, float, float]
    fragmentation_rate: tuple[float, float, float]
    placement_failures: tuple[float, float, float]
    elapsed_s: tuple[float, float, float]


def summarize_seeds(runs: Sequence[OpenbRun]) -> list[OpenbPoint]:
    """Group runs by (placement, rate) in first-seen order; mean/min/max of each number."""
    groups: dict[tuple[str, float], list[OpenbRun]] = {}
    for r in runs:
        groups.setdefault((r.placement, r.rate_per_hour), []).append(r)

    def spread(values: list[float]) -> tuple[float, float, float]:
        arr = np.asarray(values, dtype=np.float64)
        return float(arr.mean()), float(arr.min()), float(arr.max())

    return [
        OpenbPoint(
            placement=placement,
            rate_per_hour=rate,
            seeds=tuple(r.seed for r in group),
            avg_jct_h=spread([r.avg_jct_h for r in group]),
            utilization=spread([r.utilization for r in group]),
            fragmentation_rate=spread([r.fragmentation_rate for r in group]),
            placement_failures=spread([float(r.placement_failures) for r in group]),
            elapsed_s=spread([r.elapsed_s for r in group]),
        )
        for (placement, rate), group in groups.items()
    ]
