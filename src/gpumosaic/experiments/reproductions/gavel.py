"""Reproduce Gavel's simulator experiments (reference/gavel.md) with ``run_rounds``.

- static: ``minimize_makespan.trace`` (100 jobs at t = 0) on v100:p100:k80 = 8:16:24,
  one GPU per server, for each policy: avg JCT and makespan;
- continuous: single-GPU jobs on 36:36:36, Poisson arrivals, jobs 4000-5000 measured,
  LAS (``max_min_fairness``) and ``max_min_fairness_perf``; by default on Gavel's own job
  stream (``gavel_stream``), so seed 0 runs the very jobs of the reference numbers.

``gpumosaic reproduce gavel static|continuous [--workers N] [--json]``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from gpumosaic.experiments.reproductions.gavel_request import (
    SHIPPED,
    SHIPPED_FIFO,
    SHIPPED_GANDIVA,
    check_request,
)
from gpumosaic.kernel_cache import kernels_ran
from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.policies.base import Policy
from gpumosaic.results.result import SimResult
from gpumosaic.results.summary import jct_values, summarize
from gpumosaic.run.build import build_parts, run_parts
from gpumosaic.run.description import RunDescription
from gpumosaic.workloads.gavel import GavelGenerator, GavelWorkloadConfig
from gpumosaic.workloads.gavel_trace import gavel_trace_workload
from gpumosaic.workloads.throughputs import GavelThroughputTable
from gpumosaic.workloads.workload import Workload

STATIC_CLUSTER = (("v100", 8), ("p100", 16), ("k80", 24))
CONTINUOUS_CLUSTER = (("v100", 36), ("p100", 36), ("k80", 36))
WINDOW = (4000, 5000)

# reference/gavel.md: Gavel run unmodified, seed 0 (avg JCT h, makespan h).
STATIC_REFERENCE: dict[str, tuple[float, float]] = {
    "fifo": (58.76, 76.17),
    "max_min_fairness": (10.49, 22.99),
    "max_min_fairness_perf": (9.91, 19.03),
    "finish_time_fairness": (10.86, 21.91),
    "finish_time_fairness_perf": (10.09, 19.56),
    "gandiva": (9.74, 21.11),
    "min_total_duration": (19.99, 21.29),
    "min_total_duration_perf": (17.72, 17.98),
}
# Gavel's fifo and gandiva as shipped (reproductions/gavel_quirks.py): evidence for the
# mechanism, compared with the reference row of the policy they re-implement.
STATIC_POLICIES = (*STATIC_REFERENCE, "max_min_fairness_packed", *SHIPPED)
# (policy, jobs/hr) -> avg JCT h of the measured window (seed 0 where measured).
CONTINUOUS_REFERENCE: dict[tuple[str, float], float] = {
    ("max_min_fairness", 3.0): 23.82,
    ("max_min_fairness_perf", 3.0): 16.31,
    ("max_min_fairness", 4.8): 35.79,
    ("max_min_fairness_perf", 4.8): 18.97,
    ("max_min_fairness_packed", 4.8): 18.67,
}


@dataclass(frozen=True, slots=True)
class ReproRow:
    experiment: str
    policy: str
    rate_per_hour: float
    seed: int
    jobs_source: str
    avg_jct_h: float
    makespan_h: float
    reference_jct_h: float
    reference_makespan_h: float
    completed: int
    rounds: int
    policy_solves: int
    policy_solve_s: float
    elapsed_s: float
    cpu_s: float
    kernels: str = "none"  # what ran the compiled kernels: aot, jit, aot+jit, none

    @property
    def jct_error(self) -> float:
        return self.avg_jct_h / self.reference_jct_h - 1.0

    @property
    def makespan_error(self) -> float:
        return self.makespan_h / self.reference_makespan_h - 1.0


def static_workload() -> Workload:
    ref = resources.files("gpumosaic") / "data" / "gavel" / "traces" / "minimize_makespan.trace"
    with resources.as_file(ref) as path:
        return gavel_trace_workload(path)


def continuous_workload(rate: float, seed: int, jobs_source: str = "gavel") -> Workload:
    """``gavel``: Gavel's own job stream; ``gpumosaic``: our generator (same distributions)."""
    table = GavelThroughputTable.load()
    if jobs_source == "gavel":
        from gpumosaic.workloads.gavel_stream import gavel_stream_workload

        return gavel_stream_workload(rate, WINDOW, seed, table)
    config = GavelWorkloadConfig(rate_per_hour=rate, window=WINDOW)
    return Workload(f"gavel:rate={rate:g}", GavelGenerator(config, table, seed), table, WINDOW)


def repro_figures(result: SimResult) -> tuple[float, float, int]:
    """(avg JCT h over measured completed jobs, makespan h, completed measured jobs): the
    run summary's own figures (``metrics.summary``; one makespan, docs/metrics.md)."""
    summary = summarize(result)
    return summary.avg_jct_s / 3600.0, summary.makespan_s / 3600.0, len(jct_values(result.records))


def run_static(policy: str, placement: str = "strided", seed: int = 0) -> ReproRow:
    cluster = ClusterSpec.from_counts(STATIC_CLUSTER, gpus_per_node=1)
    return _row("static", policy, 0.0, seed, "trace", cluster, static_workload(), placement)


def _policy_object(policy: str, seed: int) -> Policy | None:
    """Gavel's policies as shipped (outside the registry); None: the registry's."""
    from gpumosaic.experiments.reproductions.gavel_quirks import (
        GavelShippedFifo,
        GavelShippedGandiva,
    )

    if policy == SHIPPED_FIFO:
        return GavelShippedFifo(seed)
    if policy == SHIPPED_GANDIVA:
        return GavelShippedGandiva(seed)
    return None


def simulate_rounds(
    cluster: ClusterSpec,
    counts: Sequence[tuple[str, int]] | str,
    workload: Workload,
    policy: str,
    placement: str,
    seed: int,
) -> SimResult:
    """One round-mechanism run of a reproduction, through the road (``run.build``): a
    description of the run, with the cluster and workload objects the study built and
    Gavel's as-shipped policies, which the registry does not name."""
    spelled = counts if isinstance(counts, str) else ",".join(f"{m}:{n}" for m, n in counts)
    description = RunDescription(
        cluster=spelled,
        workload=workload.name,
        policy=SHIPPED.get(policy, policy),
        placement=placement,
        seed=seed,
        mechanism="rounds",
    )
    parts = build_parts(
        description, cluster=cluster, workload=workload, policy=_policy_object(policy, seed)
    )
    return run_parts(parts).result


def run_continuous(
    policy: str, rate: float, seed: int, jobs_source: str = "gavel", placement: str = "strided"
) -> ReproRow:
    cluster = ClusterSpec.from_counts(CONTINUOUS_CLUSTER, gpus_per_node=1)
    workload = continuous_workload(rate, seed, jobs_source)
    return _row("continuous", policy, rate, seed, jobs_source, cluster, workload, placement)


def _row(
    experiment: str,
    policy: str,
    rate: float,
    seed: int,
    jobs_source: str,
    cluster: ClusterSpec,
    workload: Workload,
    placement: str,
) -> ReproRow:
    cpu0 = time.process_time()
    counts = STATIC_CLUSTER if experiment == "static" else CONTINUOUS_CLUSTER
    result = simulate_rounds(cluster, counts, workload, policy, placement, seed)
    cpu = time.process_time() - cpu0
    jct, makespan, completed = repro_figures(result)
    if experiment == "static":
        ref_key = SHIPPED.get(policy, policy)
        ref_jct, ref_makespan = STATIC_REFERENCE.get(ref_key, (float("nan"), float("nan")))
    else:
        ref_jct = CONTINUOUS_REFERENCE.get((policy, rate), float("nan"))
        ref_makespan = float("nan")
    stats = result.stats
    return ReproRow(
        experiment=experiment,
        policy=policy,
        rate_per_hour=rate,
        seed=seed,
        jobs_source=jobs_source,
        avg_jct_h=jct,
        makespan_h=makespan,
        reference_jct_h=ref_jct,
        reference_makespan_h=ref_makespan,
        completed=completed,
        rounds=stats.rounds,
        policy_solves=stats.policy_solves,
        policy_solve_s=stats.policy_solve_s,
        elapsed_s=stats.elapsed_s,
        cpu_s=cpu,
        kernels=kernels_ran(),
    )


def _static_task(args: tuple[str, str]) -> ReproRow:
    return run_static(args[0], args[1])


def _continuous_task(args: tuple[str, float, int, str, str]) -> ReproRow:
    return run_continuous(args[0], args[1], args[2], args[3], args[4])


DEFAULT_CONTINUOUS_POLICIES = ("max_min_fairness", "max_min_fairness_perf")


def run_part(
    part: str,
    policies: Sequence[str] = (),
    rates: Sequence[float] = (3.0, 4.8),
    seeds: Sequence[int] = (0, 1, 2),
    jobs_source: str = "gavel",
    placement: str = "strided",
    workers: int = 2,
    on_done: Callable[[int, int], None] | None = None,
) -> list[ReproRow]:
    """Every run of one part (``static`` or ``continuous``) in parallel, in task order.

    ``on_done(done, total)`` is called as runs finish (for a progress bar).
    """
    check_request(part, policies, jobs_source)
    tasks: list[tuple[Callable[[Any], ReproRow], Any]]
    if part == "static":
        chosen = list(policies) or list(STATIC_POLICIES)
        tasks = [(_static_task, (p, placement)) for p in chosen]
    else:
        chosen = list(policies) or list(DEFAULT_CONTINUOUS_POLICIES)
        tasks = [
            (_continuous_task, (p, float(rate), int(seed), jobs_source, placement))
            for p in chosen
            for rate in rates
            for seed in seeds
        ]
    # Imported here: multiprocessing is ~10 ms that a single run (bench_rounds.py) skips.
    from gpumosaic.experiments.parallel import parallel_map

    progress = None if on_done is None else lambda done, total, _row: on_done(done, total)
    return parallel_map(_run_task, tasks, workers, progress)


def _run_task(task: tuple[Callable[[Any], ReproRow], Any]) -> ReproRow:
    fn, args = task
    return fn(args)


def format_rows(rows: Sequence[ReproRow]) -> str:
    lines = [
        f"{'experiment':<10} {'policy':<26} {'rate':>4} {'seed':>4} {'JCT h':>7} {'ref':>6} "
        f"{'err':>7} {'mksp h':>7} {'ref':>6} {'err':>7} {'solves':>6} {'solve s':>7} {'cpu s':>6}"
    ]
    for r in rows:
        lines.append(
            f"{r.experiment:<10} {r.policy:<26} {r.rate_per_hour:>4g} {r.seed:>4} "
            f"{r.avg_jct_h:>7.2f} {r.reference_jct_h:>6.2f} {100 * r.jct_error:>+6.1f}% "
            f"{r.makespan_h:>7.2f} {r.reference_makespan_h:>6.2f} {100 * r.makespan_error:>+6.1f}% "
            f"{r.policy_solves:>6} {r.policy_solve_s:>7.1f} {r.cpu_s:>6.1f}"
        )
    return "\n".join(lines)
