"""The live round service measured against the simulator on one run description.

``compare(options)``: build the run as ``simulate --mechanism rounds`` does
(``run.build.build_parts``), start a local service on Ray (loopback) with the same policy,
placement, round length, resolve interval, seed and placement target, replay the
workload on it as emulated jobs (``experiments/sim_vs_live/replay.py``), then simulate the same
description on the live cluster's own ``ClusterSpec`` with the launch latency the live
run measured (``RoundSimulator(launch_latency_s=...)``; the mean over its new leases, in
job time: the mean, because the work a round loses is the sum of its latencies) and
compare the two: average JCT, makespan, per-job JCT differences, and the rounds whose
plan is the simulator's.

Every workload ``simulate --mechanism rounds`` takes replays: each emulated job steps at
the rate the simulator admits it with (the workload's own throughputs, handed to the job
as ``emulate --rates``: ``experiments/sim_vs_live/replay.py EmulatedJobs``), Gavel job or not. The
rounds simulator rejects CPU-only jobs (no GPU to schedule); they are not submitted live
and are said so.

The time scale: given, or chosen so the live run takes about ``wall_budget_s``: the
simulator's makespan (no launch latency) over 80 % of the budget, at least 1.
"""

from __future__ import annotations

import csv
import math
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpumosaic.errors import InputError
from gpumosaic.experiments.sim_vs_live.agreement import Agreement, job_diffs
from gpumosaic.experiments.sim_vs_live.inputs import (
    BUDGET_SHARE,
    SimVsLiveOptions,
    finite_jobs,
    live_cluster,
    model_counts,
    slurm_cluster,
)
from gpumosaic.mechanisms.contract import RunParts
from gpumosaic.mechanisms.rounds.decision import RoundPlan
from gpumosaic.model.job import JobSpec
from gpumosaic.results.result import SimResult
from gpumosaic.results.summary import summarize
from gpumosaic.run.build import build_parts
from gpumosaic.run.description import RunDescription
from gpumosaic.runtime.timescale import MAX_TIME_SCALE

if TYPE_CHECKING:
    from gpumosaic.experiments.sim_vs_live.replay import JobSubmitter, LiveReplay
    from gpumosaic.experiments.sim_vs_live.sharing import SharingRun
    from gpumosaic.runtime.cluster import LiveCluster
    from gpumosaic.sharing.speed import SpeedModel


@dataclass(frozen=True, slots=True)
class Comparison(Agreement):
    """Gavel's rounds: the agreement, the rounds both sides planned alike, and the launch
    latency the simulator was given."""

    rounds_identical: int
    launch_latency_s: float  # mean, job time (what the simulator was given)
    launch_latency_wall_s: float
    round_s: float
    live_finished: bool
    launches: int
    extensions: int
    sharing: SharingRun | None = None

    @property
    def latency_share(self) -> float:
        """Launch latency as a share of a round (job time)."""
        return self.launch_latency_s / self.round_s

    def to_json(self) -> dict[str, object]:
        sim: dict[str, object] = {"launch_latency_s": self.launch_latency_s}
        live: dict[str, object] = {
            "launch_latency_mean_s": self.launch_latency_s,
            "launch_latency_wall_s": self.launch_latency_wall_s,
            "launches": self.launches,
            "extensions": self.extensions,
            "finished": self.live_finished,
        }
        if self.sharing is not None:
            sim["sharing"] = self.sharing.sim_json()
            live["sharing"] = self.sharing.live_json()
        return self.agreement_json(sim, live, self.rounds_identical)


def rounds_description(description: RunDescription) -> RunDescription:
    return RunDescription.from_values({**description.to_json(), "mechanism": "rounds"})


def compare(
    options: SimVsLiveOptions,
    say: Callable[[str], None] = lambda _: None,
    state_dir: Path | None = None,
    submitter: JobSubmitter | None = None,
) -> Comparison:
    """``submitter``: how jobs are submitted live (default: emulated jobs at the
    simulator's rates on the live cluster's models)."""
    description = rounds_description(options.description)
    parts = build_parts(description)
    jobs = _gpu_jobs(finite_jobs(parts), say)
    from gpumosaic.experiments.sim_vs_live import sharing as sim_vs_live_sharing

    sharing = sim_vs_live_sharing.parse(options.sharing)
    if sharing is not None:
        sim_vs_live_sharing.check_jobs(jobs)
    counts = model_counts(parts)
    slurm = options.executor == "slurm"
    cluster = slurm_cluster(options.slurm_conf) if slurm else live_cluster(counts)
    sim_parts = build_parts(description, cluster=cluster.spec)
    if submitter is None:
        submitter = _emulated(sim_parts)

    scale = options.time_scale
    if scale is None:
        probe = _simulate(sim_parts, 0.0, None if sharing is None else sharing.speed(1.0, 0.0))
        span = summarize(probe[0]).makespan_s
        span = span if not math.isnan(span) else description.round_s
        scale = min(max(span / (BUDGET_SHARE * options.wall_budget_s), 1.0), MAX_TIME_SCALE)
        say(
            f"time scale {scale:.4g}: the simulator's makespan {span:,.0f} s in about "
            f"{span / scale:,.0f} s of wall time (budget {options.wall_budget_s:g} s)"
        )
        sim_parts = build_parts(description, cluster=cluster.spec)
    limit = options.wall_limit_s or 3 * options.wall_budget_s

    with tempfile.TemporaryDirectory(prefix="gpumosaic-sim-vs-live-") as tmp:
        root = state_dir if state_dir is not None else Path(tmp)
        target_path = root / "target.csv"
        root.mkdir(parents=True, exist_ok=True)
        _write_target(parts.workload.target_sample(), target_path)
        live_sharing = None if sharing is None else sharing.live_spec(scale)
        live = _run_live(
            description, counts, cluster, jobs, submitter, scale, limit, root, target_path, say,
            parts.workload.measure, live_sharing, options,
        )  # fmt: skip
    shared_run, speed = None, None
    if sharing is not None:
        shared_run, speed = sim_vs_live_sharing.measured_run(sharing, scale, str(root / "state.db"))
        say(shared_run.line())
    latencies = sorted(live.launch_latency_s)
    latency = statistics.fmean(latencies) if latencies else 0.0
    say(
        f"launch latency (round start -> first lease call), mean of {len(latencies)}: "
        f"{latency / scale:.3f} s wall = {latency:.1f} s job time = "
        f"{100 * latency / description.round_s:.1f}% of a {description.round_s:g} s round"
    )
    sim_result, sim_plans = _simulate(
        build_parts(description, cluster=cluster.spec), latency, speed
    )
    sim_summary = summarize(sim_result)
    live_summary = summarize(live.result)
    return Comparison(
        sim=sim_summary,
        live=live_summary,
        jobs=job_diffs(sim_result, live.result),
        rounds_identical=_identical_rounds(sim_plans, live.plans, live.id_of),
        time_scale=scale,
        wall_s=live.wall_s,
        launch_latency_s=latency,
        launch_latency_wall_s=latency / scale,
        round_s=description.round_s,
        live_finished=live.finished,
        launches=live.launches,
        extensions=live.extensions,
        sharing=shared_run,
    )


def _simulate(
    parts: RunParts, latency_s: float, speed: SpeedModel | None = None
) -> tuple[SimResult, list[RoundPlan]]:
    """The rounds' simulation through their plug-in, with the hooks sim-vs-live needs:
    every round's plan, the launch latency the live run measured, and (``--sharing``)
    the nvshare model with the live hand-over cost in place of the description's."""
    from dataclasses import replace

    from gpumosaic.mechanisms.contract import SimHooks
    from gpumosaic.run.registry import get_mechanism

    plans: list[RoundPlan] = []
    if speed is not None:
        parts = replace(parts, sharing=speed)
    hooks = SimHooks(on_plan=plans.append, launch_latency_s=latency_s)
    return get_mechanism("rounds").simulate(parts, None, hooks), plans


def _run_live(
    description: RunDescription,
    counts: Sequence[tuple[str, int]],
    cluster: LiveCluster,
    jobs: Sequence[JobSpec],
    submitter: JobSubmitter,
    scale: float,
    limit_s: float,
    root: Path,
    target_path: Path,
    say: Callable[[str], None],
    measure: tuple[int, int] | None = None,
    sharing: str | None = None,
    options: SimVsLiveOptions | None = None,
) -> LiveReplay:
    from gpumosaic.experiments.sim_vs_live.replay import replay
    from gpumosaic.run.serve import ServeDescription

    config = ServeDescription(
        policy=description.policy,
        placement=description.resolved_placement(),
        round_s=description.round_s,
        resolve_interval_s=description.resolve_interval_s,
        state=str(root / "state.db"),
        port=0,
        seed=description.seed,
        target_workload=str(target_path),
        time_scale=scale,
        grace_s=5.0,
        sharing=sharing,
        **_executor_options(counts, options),
    )
    last = [-1]
    started = time.monotonic()

    def progress(done: int, total: int) -> None:
        if done != last[0]:
            last[0] = done
            say(
                f"live: {done}/{total} measured jobs final after {time.monotonic() - started:.0f} s"
            )

    return replay(
        jobs,
        config,
        cluster,
        submitter,
        wall_limit_s=limit_s,
        progress=progress,
        measure=measure,
    )


def _executor_options(
    counts: Sequence[tuple[str, int]], options: SimVsLiveOptions | None
) -> dict[str, Any]:
    """Ray: the description's GPUs on local Ray, warm launchers. Slurm: its own cluster
    (``--slurm-conf``), each lease a Slurm batch job, whose launch latency (sbatch to the
    job's first lease call) the driver measures as Ray's and the simulator is given."""
    if options is not None and options.executor == "slurm":
        return {"executor": "slurm", "slurm_conf": options.slurm_conf}
    return {"cluster": ",".join(f"{m}:{c}" for m, c in counts), "warm_launchers": True}


def _emulated(parts: RunParts) -> JobSubmitter:
    """Emulated jobs at the rates the simulator admits them with: the workload's own
    throughputs on each GPU model of the (live) cluster ``parts`` was built on."""
    from gpumosaic.experiments.sim_vs_live.replay import EmulatedJobs

    models = tuple(dict.fromkeys(node.gpu for node in parts.cluster.nodes))
    return EmulatedJobs(parts.workload.throughputs, models)


def _gpu_jobs(jobs: Sequence[JobSpec], say: Callable[[str], None]) -> list[JobSpec]:
    """The jobs to submit live: the rounds simulator rejects CPU-only jobs (it schedules
    GPUs), so they are left out of the live run, and said so."""
    kept = [j for j in jobs if j.num_gpu > 0]
    if len(kept) < len(jobs):
        say(
            f"{len(jobs) - len(kept)} CPU-only job(s) not submitted live: the rounds "
            "simulator rejects them (cpu_only)"
        )
    if not kept:
        raise InputError("the workload has no GPU job to run live", field="--workload")
    return kept


def _write_target(jobs: Sequence[JobSpec], path: Path) -> None:
    """The simulator's placement target as a job list (``serve --target-workload``)."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["arrival_s", "num_gpu", "gpu_milli", "duration_s", "cpu_milli", "gpu_spec"])
        for j in jobs:
            spec = "|".join(sorted(j.allowed_models)) if j.allowed_models else ""
            w.writerow([0, j.num_gpu, j.gpu_milli, 1, j.cpu_milli, spec])


def _plan_key(plan: RoundPlan, id_of: dict[int, int] | None) -> frozenset[object]:
    """Which jobs run, on which GPU type and node(s), with what share. The GPU indices
    within a node are left out: two GPUs of one node are the same to a job, and which of
    them a job gets is a placement tie broken by the order of near-equal priorities."""
    keys = []
    for e in plan.entries:
        ids = tuple(sorted(id_of.get(i, -1) if id_of is not None else i for i in e.job_ids))
        where = tuple(sorted((p.node, len(p.gpus), p.gpu_milli) for p in e.parts))
        keys.append((ids, e.gpu_type, where))
    return frozenset(keys)


def _identical_rounds(
    sim: Sequence[RoundPlan], live: Sequence[RoundPlan], id_of: dict[int, int]
) -> int:
    """Rounds (in order, empty plans skipped) whose live plan is the simulator's."""
    sim_keys = [_plan_key(p, None) for p in sim if len(p)]
    live_keys = [_plan_key(p, id_of) for p in live if len(p)]
    return sum(1 for a, b in zip(sim_keys, live_keys, strict=False) if a == b)
