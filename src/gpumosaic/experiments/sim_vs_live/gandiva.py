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
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from gpumosaic.errors import InputError
from gpumosaic.experiments.sim_vs_live.agreement import Agreement, job_diffs
from gpumosaic.experiments.sim_vs_live.counts import ActionCounts, Tally
from gpumosaic.experiments.sim_vs_live.gandiva_live import check_gavel_types, run_live
from gpumosaic.experiments.sim_vs_live.inputs import (
    BUDGET_SHARE,
    SimVsLiveOptions,
    finite_jobs,
    live_cluster,
    model_counts,
)
from gpumosaic.mechanisms.contract import RunParts
from gpumosaic.mechanisms.gandiva import GandivaConfig
from gpumosaic.model.job import JobSpec
from gpumosaic.results.result import SimResult
from gpumosaic.results.summary import summarize
from gpumosaic.run.build import build_parts
from gpumosaic.run.description import RunDescription
from gpumosaic.runtime.timescale import MAX_TIME_SCALE

if TYPE_CHECKING:
    from gpumosaic.model.cluster import ClusterSpec

MECHANISM_FLAG = "--mechanism"
MIN_WALL_S = 2.0  # a quantum or trial shorter than this (wall) is refused (module doc)


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
    check_gavel_types(jobs)
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
        live = run_live(description, config, counts, cluster, jobs, scale, limit, root, say)
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
    """Gandiva's simulation through its plug-in, with ``config`` (the live costs) as its
    options and every decider step counted (``SimHooks.on_step``)."""
    from gpumosaic.mechanisms.contract import SimHooks
    from gpumosaic.run.registry import get_mechanism

    tally = Tally()
    result = get_mechanism("gandiva").simulate(
        replace(parts, sharing=config), None, SimHooks(on_step=tally)
    )
    return result, tally.counts()
