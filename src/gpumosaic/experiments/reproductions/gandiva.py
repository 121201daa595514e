"""Gandiva's mechanisms on Gavel's generated workloads: packing and migration on vs off.

Two scenarios (docs/gandiva.md explains the choices):

- ``36:36:36``: Gavel's heterogeneous cluster (36 V100 + 36 P100 + 36 K80), 4 GPUs per
  server, Gavel's continuous single-GPU stream; average JCT of the jobs with ids in a
  window, the stream running on until they are all done (Gavel's steady-state method).
- ``8xV100 overload``: 8 V100 in 2 servers of 4, a burst of multi-GPU jobs arriving far
  faster than the cluster drains (8-GPU jobs are made 4-GPU jobs of the same duration,
  since no server has 8 GPUs).
- ``8xV100 1-GPU overload``: the same cluster and a burst of single-GPU jobs, where every
  job can be packed: the ceiling of what packing can give on V100s.

GPU utilization is measured over a window while the cluster is loaded (the measured jobs'
arrivals), not up to the last straggler's finish: ``busy`` is the share of GPU-seconds in
which some job ran, ``effective`` weights them by each job's speed relative to running
alone on that GPU (a kept pair counts the sum of its normalized throughputs, so it may
exceed 1). Gandiva's paper reports about 26% higher aggregate utilization from packing.

Run ``gpumosaic reproduce gandiva`` (``--quick`` for a smaller run, ``--json`` for the rows).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import islice

import numpy as np

from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.job import JobSpec
from gpumosaic.results.result import JobStatus, SimResult
from gpumosaic.workloads.gavel import REFERENCE_GPU, GavelGenerator, GavelWorkloadConfig
from gpumosaic.workloads.throughputs import GavelThroughputTable
from gpumosaic.workloads.workload import Workload

PAPER_PACKING_GAIN = 0.26  # Gandiva (OSDI'18): aggregate cluster utilization +26%


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    counts: tuple[tuple[str, int], ...]
    gpus_per_node: int
    rate_per_hour: float
    multigpu: bool
    window: tuple[int, int]  # measured job ids [A, B)
    jobs: int | None  # None: an unbounded stream (run until the window's jobs are done)


@dataclass(frozen=True, slots=True)
class Variant:
    name: str
    packing: bool
    migration: bool
    time_slicing: bool = True

    @property
    def sharing(self) -> str:
        """The variant as ``--sharing`` spells it (Gandiva's other options at defaults)."""
        on = {True: "on", False: "off"}
        return (
            f"gandiva:packing={on[self.packing]},migration={on[self.migration]},"
            f"time_slicing={on[self.time_slicing]}"
        )


@dataclass(frozen=True, slots=True)
class EvalRow:
    scenario: str
    variant: str
    measured_done: int
    avg_jct_h: float
    end_h: float
    busy: float  # share of GPU-seconds in the window with a job running
    effective: float  # busy weighted by normalized speed
    work_per_busy: float  # in the window: normalized work per busy GPU-second (1 = all alone)
    packs_kept: int
    packs_undone: int
    migrations: int
    suspended_share: float  # suspended time / JCT, over measured completed jobs
    wall_s: float


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "36:36:36", (("v100", 36), ("p100", 36), ("k80", 36)), 4, 6.0, False, (100, 300), None
    ),
    Scenario("8xV100 overload", (("v100", 8),), 4, 1.0, True, (0, 60), 60),
    Scenario("8xV100 1-GPU overload", (("v100", 8),), 4, 2.0, False, (0, 60), 60),
)
QUICK_SCENARIOS: tuple[Scenario, ...] = (
    Scenario("36:36:36", (("v100", 36), ("p100", 36), ("k80", 36)), 4, 6.0, False, (50, 100), None),
    Scenario("8xV100 overload", (("v100", 8),), 4, 1.0, True, (0, 30), 30),
    Scenario("8xV100 1-GPU overload", (("v100", 8),), 4, 2.0, False, (0, 30), 30),
)
VARIANTS: tuple[Variant, ...] = (
    Variant("no sharing (FIFO, affinity)", packing=False, migration=False, time_slicing=False),
    Variant("time-slicing", packing=False, migration=False),
    Variant("+ migration", packing=False, migration=True),
    Variant("+ packing", packing=True, migration=False),
    Variant("+ packing + migration", packing=True, migration=True),
)


class ClippedScale:
    """Re-iterable job stream whose jobs ask for at most ``max_gpus`` GPUs, keeping each
    clipped job's duration on the reference GPU (its steps are rescaled)."""

    def __init__(self, jobs: GavelGenerator, max_gpus: int) -> None:
        self.jobs = jobs
        self.max_gpus = max_gpus

    def __iter__(self) -> Iterator[JobSpec]:
        table = self.jobs.table
        for job in self.jobs:
            if job.num_gpu <= self.max_gpus:
                yield job
                continue
            duration = job.work / table.isolated(job.job_type, job.num_gpu, REFERENCE_GPU)
            k = self.max_gpus
            work = duration * table.isolated(job.job_type, k, REFERENCE_GPU)
            yield replace(job, num_gpu=k, work=work)


def build(
    scenario: Scenario, table: GavelThroughputTable, seed: int
) -> tuple[ClusterSpec, Workload]:
    cluster = ClusterSpec.from_counts(scenario.counts, gpus_per_node=scenario.gpus_per_node)
    config = GavelWorkloadConfig(
        jobs=scenario.jobs,
        rate_per_hour=scenario.rate_per_hour,
        window=scenario.window,
        multigpu=scenario.multigpu,
    )
    stream = ClippedScale(GavelGenerator(config, table, seed), scenario.gpus_per_node)
    jobs = list(stream) if scenario.jobs is not None else stream
    return cluster, Workload(scenario.name, jobs, table, measure=scenario.window)


def window_of(scenario: Scenario, workload: Workload) -> tuple[float, float]:
    """While jobs keep coming: from the first measured job's arrival to the end of the run
    for an unbounded stream (arrivals go on until the measured jobs are done; early on
    the cluster is not yet full and every variant does the same), to the last arrival for
    a finite burst (after it the cluster drains). ``evaluate`` then cuts a stream's window
    at the earliest end among the variants, so that all are measured over the same span."""
    first, last = scenario.window
    arrivals = [j.arrival_s for j in islice(iter(workload.jobs), last)]
    if scenario.jobs is None:
        return arrivals[first], float("inf")
    return arrivals[first], arrivals[last - 1]


def run_variant(
    scenario: Scenario,
    variant: Variant,
    table: GavelThroughputTable,
    seed: int = 0,
    window_s: tuple[float, float] | None = None,
) -> EvalRow:
    return run_variant_result(scenario, variant, table, seed, window_s)[0]


def run_variant_result(
    scenario: Scenario,
    variant: Variant,
    table: GavelThroughputTable,
    seed: int = 0,
    window_s: tuple[float, float] | None = None,
) -> tuple[EvalRow, SimResult]:
    """One variant through the road (``run.build``): a description of the run
    (``--mechanism gandiva``, the variant as its ``--sharing``, ``--seed``) with the
    cluster, the generated stream and the measurement window this study built, which no
    description names; the row and the run's result."""
    cluster, workload = build(scenario, table, seed)
    # The road (and Gandiva's simulator) only when a run starts: the command's --help
    # lists this module.
    from gpumosaic.run.build import build_parts, run_parts
    from gpumosaic.run.description import RunDescription

    description = RunDescription(
        cluster=",".join(f"{model}:{count}" for model, count in scenario.counts),
        gpus_per_node=scenario.gpus_per_node,
        workload=workload.name,
        policy="fifo",
        seed=seed,
        mechanism="gandiva",
        sharing=variant.sharing,
    )
    window = window_s or window_of(scenario, workload)
    started = time.perf_counter()
    parts = build_parts(description, cluster=cluster, workload=workload, window_s=window)
    result = run_parts(parts).result
    row = summarize(
        scenario.name, variant.name, result, cluster.num_gpus, time.perf_counter() - started
    )
    return row, result


def summarize(
    scenario: str, variant: str, result: SimResult, num_gpus: int, wall_s: float
) -> EvalRow:
    report = result.gandiva
    assert report is not None and report.window is not None  # a Gandiva run with a window
    window = report.window
    done = [r for r in result.records if r.measured and r.status is JobStatus.COMPLETED]
    jct = np.array([r.jct_s for r in done])
    suspended = sum(r.suspended_s for r in done)
    capacity = num_gpus * max(window.end_s - window.start_s, 1e-9)
    return EvalRow(
        scenario=scenario,
        variant=variant,
        measured_done=len(done),
        avg_jct_h=float(jct.mean()) / 3600 if len(jct) else float("nan"),
        end_h=result.end_s / 3600,
        busy=window.busy_gpu_s / capacity,
        effective=window.effective_gpu_s / capacity,
        work_per_busy=window.effective_gpu_s / max(window.busy_gpu_s, 1e-9),
        packs_kept=report.packs_kept,
        packs_undone=report.packs_undone,
        migrations=report.migrations,
        suspended_share=suspended / float(jct.sum()) if len(jct) else float("nan"),
        wall_s=wall_s,
    )


def evaluate(
    scenarios: Sequence[Scenario] = SCENARIOS,
    variants: Sequence[Variant] = VARIANTS,
    seed: int = 0,
    table: GavelThroughputTable | None = None,
) -> list[EvalRow]:
    """Every variant on every scenario (same jobs per scenario); one row each."""
    table = table or GavelThroughputTable.load()
    rows: list[EvalRow] = []
    for scenario in scenarios:
        first = [run_variant(scenario, v, table, seed) for v in variants]
        if scenario.jobs is None:  # a stream: again, over a window common to all variants
            _, workload = build(scenario, table, seed)
            start, _ = window_of(scenario, workload)
            end = min(r.end_h for r in first) * 3600
            first = [run_variant(scenario, v, table, seed, (start, end)) for v in variants]
        rows.extend(first)
    return rows


@dataclass(frozen=True, slots=True)
class PackingGain:
    scenario: str
    work_per_busy_gain: float  # packing on / off - 1, migration on in both
    effective_gain: float  # effective utilization in the window, on / off - 1
    jct_change: float  # avg JCT packing on / off - 1


def packing_gains(rows: Sequence[EvalRow]) -> list[PackingGain]:
    out: list[PackingGain] = []
    for scenario in dict.fromkeys(r.scenario for r in rows):
        by_variant = {r.variant: r for r in rows if r.scenario == scenario}
        on, off = by_variant.get("+ packing + migration"), by_variant.get("+ migration")
        if on is None or off is None:
            continue
        out.append(
            PackingGain(
                scenario,
                work_per_busy_gain=on.work_per_busy / off.work_per_busy - 1,
                effective_gain=on.effective / off.effective - 1,
                jct_change=on.avg_jct_h / off.avg_jct_h - 1,
            )
        )
    return out


def render(rows: Sequence[EvalRow], seed: int = 0) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Gandiva on Gavel's generated workloads (seed {seed})")
    for column in (
        "scenario", "variant", "jobs", "avg JCT h", "end h", "busy", "effective",
        "work/busy", "kept", "undone", "migr.", "suspended", "wall s",
    ):  # fmt: skip
        table.add_column(column, justify="left" if column in ("scenario", "variant") else "right")
    for r in rows:
        table.add_row(
            r.scenario, r.variant, str(r.measured_done), f"{r.avg_jct_h:.2f}", f"{r.end_h:.0f}",
            f"{r.busy:.1%}", f"{r.effective:.1%}", f"{r.work_per_busy:.3f}", str(r.packs_kept),
            str(r.packs_undone), str(r.migrations),
            f"{r.suspended_share:.0%}", f"{r.wall_s:.1f}",
        )  # fmt: skip
    for col in table.columns:  # at any width (80 columns, a pipe) no cell is cut
        col.overflow = "fold"
        col.no_wrap = col.header in ("scenario", "variant")
    console = Console()
    console.print(table)
    for gain in packing_gains(rows):
        console.print(
            f"{gain.scenario}: packing (both with migration) changes work per busy GPU-second"
            f" by {gain.work_per_busy_gain:+.1%}, effective utilization by"
            f" {gain.effective_gain:+.1%}, avg JCT by {gain.jct_change:+.1%}"
            f" (paper: aggregate utilization +{PAPER_PACKING_GAIN:.0%})"
        )
