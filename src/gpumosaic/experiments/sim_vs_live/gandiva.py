"""``sim-vs-live --mechanism gandiva``: Gandiva live (``serve --mechanism gandiva``)
measured against ``simulate --mechanism gandiva`` on one run description.

``compare_gandiva(options)``: build the run as ``simulate --mechanism gandiva`` does
(``run.build.build_parts``), start a local service on Ray (loopback) with the same
Gandiva options and seed, submit the workload to it as emulated jobs that step at Gavel's
table rate alone and at their rate in Gavel's measured pair while packed
(``mechanisms/gandiva/live/emulate.py``), then simulate the same description on the live cluster's
own ``ClusterSpec`` with the costs the live run measured
(``GandivaDriver.times``: the mean time from a decision to the first lease call of the
job's new process, in job time) as ``start_s``, ``switch_s`` and ``migration_cost_s``,
and compare the two. A cost the live run never incurred keeps the description's value
(the output says which).

The comparison's ``rounds_identical`` is null: Gandiva has no rounds, and its decisions
are driven by events (finishes, quantum ends) whose times differ between the two sides by
the live costs, so there is no plan per round to compare; its counts of suspensions,
migrations and packs on both sides stand for it.

The time scale: given, or chosen so the live run takes about ``wall_budget_s`` (as for
rounds). A quantum or a trial that would last under ``MIN_WALL_S`` of wall time under the
scale is refused (one line naming ``--mechanism``): a hand-over of a real process takes a
good part of a second, so a quantum of 60 job seconds is nothing at a scale of hundreds.
"""

from __future__ import annotations

import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from gpumosaic.errors import InputError
from gpumosaic.experiments.sim_vs_live.agreement import Agreement, job_diffs
from gpumosaic.experiments.sim_vs_live.inputs import (
    BUDGET_SHARE,
    SimVsLiveOptions,
    finite_jobs,
    live_cluster,
    model_counts,
)
from gpumosaic.mechanisms.contract import RunParts
from gpumosaic.mechanisms.gandiva import (
    GandivaConfig,
    Migrate,
    Pack,
    Step,
    Suspend,
    Unpack,
)
from gpumosaic.model.job import JobSpec
from gpumosaic.results.result import JobRecord, JobStatus, RunStats, SimResult, TimelineRecorder
from gpumosaic.results.summary import summarize
from gpumosaic.run.build import build_parts
from gpumosaic.run.description import RunDescription
from gpumosaic.runtime.jobs.submission import JobSubmission
from gpumosaic.runtime.timescale import MAX_TIME_SCALE

if TYPE_CHECKING:
    from gpumosaic.mechanisms.gandiva.live.driver import GandivaDriver, HandOverTimes
    from gpumosaic.model.cluster import ClusterSpec
    from gpumosaic.runtime.cluster import LiveCluster

MECHANISM_FLAG = "--mechanism"
MIN_WALL_S = 2.0  # a quantum or trial shorter than this (wall) is refused (module doc)
GRACE_S = 5.0  # SIGTERM -> SIGKILL for a job told to stop (it checkpoints first)


@dataclass(frozen=True, slots=True)
class ActionCounts:
    """What Gandiva did, counted the same way on both sides: ``suspensions`` (Suspend and
    Unpack actions: a running job stopped without finishing), ``migrations`` (Migrate
    actions, within or across servers), ``packs`` (Pack actions: pairs tried)."""

    suspensions: int = 0
    migrations: int = 0
    packs: int = 0

    def to_json(self) -> dict[str, int]:
        return {"suspensions": self.suspensions, "migrations": self.migrations, "packs": self.packs}


class _Tally:
    """Counts a simulator's steps (its ``on_step``)."""

    def __init__(self) -> None:
        self.suspensions = self.migrations = self.packs = 0

    def __call__(self, _now: float, step: Step) -> None:
        for action in step.actions:
            if isinstance(action, Suspend | Unpack):
                self.suspensions += 1
            elif isinstance(action, Migrate):
                self.migrations += 1
            elif isinstance(action, Pack):
                self.packs += 1

    def counts(self) -> ActionCounts:
        return ActionCounts(self.suspensions, self.migrations, self.packs)


@dataclass(frozen=True, slots=True)
class MeasuredCost:
    """One live cost (job time): its samples' mean and count, and the value the
    simulator was given (the mean, or the description's value when there is none)."""

    mean_s: float
    samples: int
    simulated_s: float

    def to_json(self) -> dict[str, float | int | None]:
        mean = None if math.isnan(self.mean_s) else self.mean_s
        return {"mean_s": mean, "samples": self.samples, "simulated_s": self.simulated_s}


def measured(samples: Sequence[float], fallback_s: float) -> MeasuredCost:
    if not samples:
        return MeasuredCost(math.nan, 0, fallback_s)
    mean = statistics.fmean(samples)
    return MeasuredCost(mean, len(samples), mean)


@dataclass(frozen=True, slots=True)
class GandivaComparison(Agreement):
    """Gandiva: the agreement, each side's suspensions, migrations and packs, and the
    costs measured live that the simulator was given."""

    live_finished: bool
    sim_counts: ActionCounts
    live_counts: ActionCounts
    start: MeasuredCost
    switch: MeasuredCost
    migration: MeasuredCost
    pack: MeasuredCost  # a guest's launch beside its running host (the simulator: switch_s)
    config: GandivaConfig  # what both sides ran (the simulator's costs: the measured ones)
    launches: int

    rounds_identical = None  # Gandiva has no rounds (module doc)

    def to_json(self) -> dict[str, object]:
        sim = {
            **self.sim_counts.to_json(),
            "start_s": self.start.simulated_s,
            "switch_s": self.switch.simulated_s,
            "migration_cost_s": self.migration.simulated_s,
            "quantum_s": self.config.quantum_s,
        }
        live = {
            **self.live_counts.to_json(),
            "start": self.start.to_json(),
            "switch": self.switch.to_json(),
            "migration": self.migration.to_json(),
            "pack": self.pack.to_json(),
            "launches": self.launches,
            "finished": self.live_finished,
        }
        return self.agreement_json(sim, live, None)


def gandiva_description(description: RunDescription, mechanism: str) -> RunDescription:
    """The description with ``--mechanism gandiva[:key=value,...]``: the options go to
    ``sharing`` (``simulate --mechanism gandiva --sharing gandiva:...``)."""
    name, _, options = mechanism.partition(":")
    if name.strip().lower() != "gandiva":
        raise InputError("must be rounds or gandiva[:key=value,...]", field=MECHANISM_FLAG)
    sharing = f"gandiva:{options}" if options.strip() else "gandiva"
    values = {
        **description.to_json(),
        "mechanism": "gandiva",
        "sharing": sharing,
        "placement": description.placement,  # None: Gandiva's own (as serve's)
    }
    return RunDescription.from_values(values)


def live_mechanism(config: GandivaConfig) -> str:
    """``serve --mechanism`` for a config: every field spelled out."""
    from dataclasses import fields

    parts = []
    for f in fields(config):
        value = getattr(config, f.name)
        parts.append(f"{f.name}={'on' if value is True else 'off' if value is False else value}")
    return "gandiva:" + ",".join(parts)


def compare_gandiva(
    options: SimVsLiveOptions,
    mechanism: str,
    say: Callable[[str], None] = lambda _: None,
    state_dir: Path | None = None,
) -> GandivaComparison:
    if options.sharing is not None:
        raise InputError(
            "is not compared under --mechanism gandiva yet: serve --mechanism gandiva "
            "--sharing runs packed pairs under the share runtime, but the simulator has no "
            "model of Gandiva's pairs under nvshare's quanta (docs/gandiva.md)",
            field="--sharing",
            value=options.sharing,
        )
    if options.description.policy.strip().lower() != "fifo":
        raise InputError(
            "serve --mechanism gandiva queues in arrival order: use --policy fifo",
            field="--policy",
            value=options.description.policy,
        )
    description = gandiva_description(options.description, mechanism)
    parts = build_parts(description)
    config = parts.sharing
    assert isinstance(config, GandivaConfig)
    jobs = replayed_jobs(parts)
    _check_gavel_types(jobs)
    counts = model_counts(parts)

    scale = options.time_scale
    if scale is None:  # from the description's cluster: every mistake is found before Ray
        probe, _ = _simulate(_same_jobs(description, None, jobs), config)
        span = summarize(probe).makespan_s
        span = span if not math.isnan(span) else config.quantum_s
        scale = min(max(span / (BUDGET_SHARE * options.wall_budget_s), 1.0), MAX_TIME_SCALE)
        say(
            f"time scale {scale:.4g}: the simulator's makespan {span:,.0f} s in about "
            f"{span / scale:,.0f} s of wall time (budget {options.wall_budget_s:g} s)"
        )
    _check_slices(config, scale)
    limit = options.wall_limit_s or 3 * options.wall_budget_s
    cluster = live_cluster(counts)

    with tempfile.TemporaryDirectory(prefix="gpumosaic-sim-vs-live-gandiva-") as tmp:
        root = state_dir if state_dir is not None else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        live = _run_live(description, config, counts, cluster, jobs, scale, limit, root, say)
    measured_ids = {j.id for j in jobs if parts.workload.is_measured(j.id)}
    records = tuple(replace(r, measured=r.job_id in measured_ids) for r in live.result.records)
    live = replace(live, result=replace(live.result, records=records))
    times = live.times
    start = measured(times.start, config.start_s)
    switch = measured(times.switch or times.pack, config.switch_s)
    migration = measured(times.migration, config.migration_cost_s)
    pack = measured(times.pack, switch.simulated_s)
    for name, cost in (("start", start), ("switch", switch), ("migration", migration)):
        if cost.samples:
            say(
                f"live {name}: mean of {cost.samples} = {cost.mean_s / scale:.3f} s wall = "
                f"{cost.mean_s:,.1f} s job time"
            )
        else:
            say(f"live {name}: none happened; the simulator keeps {cost.simulated_s:g} s")
    if switch.simulated_s >= config.quantum_s:
        raise InputError(
            f"a live hand-over took {switch.simulated_s:,.0f} s of job time, a quantum or more "
            f"({config.quantum_s:g} s): raise gandiva:quantum= or lower --time-scale",
            field=MECHANISM_FLAG,
        )
    sim_config = replace(
        config,
        start_s=start.simulated_s,
        switch_s=switch.simulated_s,
        migration_cost_s=migration.simulated_s,
    )
    sim_result, sim_counts = _simulate(_same_jobs(description, cluster.spec, jobs), sim_config)
    return GandivaComparison(
        sim=summarize(sim_result),
        live=summarize(live.result),
        jobs=job_diffs(sim_result, live.result),
        time_scale=scale,
        wall_s=live.wall_s,
        live_finished=live.finished,
        sim_counts=sim_counts,
        live_counts=live.counts,
        start=start,
        switch=switch,
        migration=migration,
        pack=pack,
        config=sim_config,
        launches=live.launches,
    )


def replayed_jobs(parts: RunParts) -> list[JobSpec]:
    """The jobs both sides run: with a window, the stream up to its last measured job
    (the simulator is given exactly these, ``_same_jobs``). Unlike the rounds comparison,
    which replays the stream on past the window as the rounds simulator runs it, Gandiva's
    simulation and its live run end with the window's jobs."""
    jobs = finite_jobs(parts)
    measure = parts.workload.measure
    return jobs if measure is None else [j for j in jobs if j.id < measure[1]]


def _same_jobs(
    description: RunDescription, cluster: ClusterSpec | None, jobs: Sequence[JobSpec]
) -> RunParts:
    """The run's parts with exactly the jobs the live side replays (a window's stream is
    cut after its last measured job there, so the simulator's is too)."""
    from gpumosaic.workloads.workload import Workload

    stream = build_parts(description).workload
    workload = Workload(stream.name, tuple(jobs), stream.throughputs, stream.measure)
    return build_parts(description, cluster=cluster, workload=workload)


def _check_slices(config: GandivaConfig, scale: float) -> None:
    for key, job_s in (("quantum", config.quantum_s), ("profile", config.profile_s)):
        if job_s / scale < MIN_WALL_S:
            raise InputError(
                f"{key}={job_s:g} s is {job_s / scale:.3g} s of wall time at time scale "
                f"{scale:.4g}, shorter than a live hand-over can honour ({MIN_WALL_S:g} s): "
                f"use gandiva:{key}={math.ceil(MIN_WALL_S * scale):d} or more, or a lower "
                "--time-scale",
                field=MECHANISM_FLAG,
            )


# ---- the two sides -----------------------------------------------------------------


def _simulate(parts: RunParts, config: GandivaConfig) -> tuple[SimResult, ActionCounts]:
    from typing import cast

    from gpumosaic.mechanisms.gandiva.sim.simulator import GandivaSimulator
    from gpumosaic.policies.ordering import QueueOrder

    tally = _Tally()
    simulator = GandivaSimulator(
        parts.cluster,
        parts.workload,
        config,
        parts.rng,
        order=cast(QueueOrder, parts.policy),
        placement=parts.placement,
        backfill=parts.description.backfill,
        on_step=tally,
    )
    return simulator.run(), tally.counts()


@dataclass(frozen=True, slots=True)
class LiveGandiva:
    result: SimResult  # records keyed by the workload's job ids, times in job time
    times: HandOverTimes
    counts: ActionCounts
    wall_s: float
    finished: bool
    launches: int


def _check_gavel_types(jobs: Sequence[JobSpec]) -> None:
    """Gandiva's emulated jobs step at Gavel's table rates, alone and packed (the pair
    rates the simulator's Gandiva reads): a job without a Gavel type has no pair rate, so
    ``--mechanism gandiva`` takes Gavel workloads and job lists with ``job_type`` only."""
    from gpumosaic.workloads.throughputs import GavelThroughputTable

    table = GavelThroughputTable.load()
    for job in jobs:
        scale = max(job.num_gpu, 1)
        if not any(table.has(job.job_type, scale, column) for column in table.gpu_types):
            raise InputError(
                f"job {job.id} ({job.job_type!r} on {scale} GPU(s)) has no rate in Gavel's "
                "table, so Gandiva cannot emulate it live (its pair rates are Gavel's): use "
                "a Gavel workload or a job list with job_type and steps",
                field="--workload",
            )


def _submission(job: JobSpec, checkpoint_every_s: float) -> JobSubmission:
    """The job as Gandiva's emulated job (``mechanisms/gandiva/live/emulate.py``); its save cadence
    (job time) as ``GPUMOSAIC_CHECKPOINT_EVERY_S``."""
    return JobSubmission(
        command=emulate_command(job.job_type),
        steps=float(job.work),
        gpus=max(job.num_gpu, 1),
        gpu_milli=job.gpu_milli,
        gpu_models=sorted(job.allowed_models) if job.allowed_models else [],
        priority_weight=job.priority_weight,
        name=job.name or f"w{job.id}",
        job_type=job.job_type,
        env={"GPUMOSAIC_CHECKPOINT_EVERY_S": repr(float(checkpoint_every_s))},
    )


def emulate_command(job_type: str, python: str = sys.executable) -> str:
    import shlex

    return (
        f"{shlex.quote(python)} -m gpumosaic.mechanisms.gandiva.live.emulate "
        f"--job-type {shlex.quote(job_type)}"
    )


def _run_live(
    description: RunDescription,
    config: GandivaConfig,
    counts: Sequence[tuple[str, int]],
    cluster: LiveCluster,
    jobs: Sequence[JobSpec],
    scale: float,
    limit_s: float,
    root: Path,
    say: Callable[[str], None],
) -> LiveGandiva:
    from gpumosaic.experiments.sim_vs_live.replay import Arrivals
    from gpumosaic.run.serve import ServeDescription, Service

    service_config = ServeDescription(
        state=str(root / "state.db"),
        port=0,
        cluster=",".join(f"{m}:{c}" for m, c in counts),
        seed=description.seed,
        time_scale=scale,
        grace_s=GRACE_S,
        warm_launchers=True,
        mechanism=live_mechanism(config),
        policy=description.policy,
        placement=description.placement,  # None: Gandiva's own affinity order
    )
    service = Service(service_config, cluster)
    store, clock = service.store, service.clock
    cadence = config.quantum_s  # a stop saves anyway; this bounds a lost process's redo
    arrivals = Arrivals(
        jobs,
        lambda job: store.add_job(_submission(job, cadence), clock(), service_config.max_retries),
    )
    arrivals.submit_due(0.0)  # before the service starts, as the simulator admits them
    ordered, id_of = arrivals.ordered, arrivals.ids
    started = time.monotonic()
    service.start()
    finished = False
    last = -1
    try:
        driver = service.gandiva_driver
        assert driver is not None
        give_up = started + limit_s
        while time.monotonic() < give_up:
            if service.driver_error is not None:
                raise service.driver_error
            now = clock() - driver.epoch
            arrivals.submit_due(now)
            done = sum(1 for j in store.jobs() if j.terminal)
            if done != last:
                last = done
                took = time.monotonic() - started
                say(f"live: {done}/{len(ordered)} jobs final after {took:.0f} s")
            if arrivals.all_in and done == len(ordered):
                finished = True
                break
            time.sleep(arrivals.wait_s(now, scale))
    finally:
        rows = store.jobs()  # the store closes with the service
        service.stop()
    wall = time.monotonic() - started
    assert driver is not None
    return LiveGandiva(
        result=_live_result(rows, driver, id_of, ordered, wall),
        times=driver.times,
        counts=ActionCounts(
            driver.counters.suspensions, driver.counters.migrations, driver.counters.packs
        ),
        wall_s=wall,
        finished=finished,
        launches=driver.counters.launches,
    )


def _live_result(
    rows: Sequence[object],
    driver: GandivaDriver,
    id_of: dict[int, int],
    jobs: Sequence[JobSpec],
    wall_s: float,
) -> SimResult:
    """The store's rows as the simulator's records (job time, the workload's ids): a
    job's times run from its arrival in the decider (its submission, or the service's
    start for one submitted before it)."""
    from gpumosaic.runtime.state.records import JobRow

    spec_of = {j.id: j for j in jobs}
    records = []
    for row in rows:
        assert isinstance(row, JobRow)
        spec = spec_of[id_of[row.id]]
        # job time since the decider's arrival, from the workload's arrival
        shift = spec.arrival_s - max(row.submitted_at - driver.epoch, 0.0) - driver.epoch

        def at(t: float | None, shift: float = shift) -> float:
            return math.nan if t is None else t + shift

        status = {
            "done": JobStatus.COMPLETED,
            "rejected": JobStatus.REJECTED,
            "running": JobStatus.RUNNING,
        }.get(row.state, JobStatus.QUEUED)
        records.append(
            JobRecord(
                job_id=spec.id,
                name=spec.name,
                job_type=spec.job_type,
                arrival_s=spec.arrival_s,
                start_s=at(row.started_at),
                finish_s=at(row.finished_at) if status is JobStatus.COMPLETED else math.nan,
                num_gpu=spec.num_gpu,
                gpu_milli=spec.gpu_milli,
                status=status,
                reason=row.reason,
                gpu_model=row.gpu_type,
            )
        )
    records.sort(key=lambda r: r.job_id)
    end = max((r.finish_s for r in records if r.finish_s == r.finish_s), default=0.0)
    total_milli = int(driver.decider.state.total_gpu_milli)
    return SimResult(
        records=tuple(records),
        timeline=TimelineRecorder().freeze(),  # no samples: live utilization is not read
        stats=RunStats(events=len(records), elapsed_s=wall_s),
        total_gpu_milli=total_milli,
        end_s=end,
        fallbacks=driver.decider.fallbacks,
    )
