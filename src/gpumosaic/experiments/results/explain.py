"""``explain``: one job's story in one run, from what the run stored (its row of the jobs
table and the placements of the jobs around it).

What the simulators record is each job's arrival, start, finish, final status and final
verdict (the filter that rejected it, or why it still waits), its placement (node, GPUs)
and counters of suspensions, hand-overs and migrations. They do not record each wait's
cause while it queued nor the times of preemptions: those lines say so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from gpumosaic.errors import InputError
from gpumosaic.experiments.results.product import ARRIVED_AXIS
from gpumosaic.experiments.results.store import (
    RUNS_TABLE,
    check_store,
    read_description,
    run_folder,
)

NOT_RECORDED = (
    "not recorded: the cause of each wait while it queued (only the final verdict is "
    "kept) and the times of preemptions (only their counts)"
)
NOT_RECORDED_FILL = (
    "not recorded: which node each filter turned down (only the verdict over all nodes)"
)
# The filter's reason codes (placement.filter.Reason), in words.
REASON_WORDS = {
    "gpu_model": "no node has a GPU model the task allows",
    "cpu": "no allowed node had enough CPU free",
    "memory": "no allowed node had enough memory free",
    "gpu": "no allowed node had enough GPUs with the milli it asks free",
    "never_fits": "no node could hold it even empty",
}


@dataclass(frozen=True, slots=True)
class JobStory:
    run_id: str
    job_id: int
    verdicts: tuple[str, ...]
    missing: str


def pick_run(root: Path, run: str | None) -> str:
    check_store(root)
    ids = pq.read_table(root / RUNS_TABLE, columns=["run_id"]).column("run_id").to_pylist()
    if run is None:
        if len(ids) == 1:
            return str(ids[0])
        raise InputError(
            f"this folder holds {len(ids)} runs: name one with --run RUN_ID (e.g. "
            f'{ids[0]}; gpumosaic query {root} "SELECT * FROM runs" lists them)',
            field="--run",
        )
    matches = [i for i in ids if str(i).startswith(run)]
    if len(matches) != 1:
        found = "no run" if not matches else f"{len(matches)} runs"
        raise InputError(f"{found} with an id starting {run!r}", field="--run")
    return str(matches[0])


def explain_job(root: Path, job_id: int, run: str | None = None) -> JobStory:
    run_id = pick_run(root, run)
    folder = run_folder(root, run_id)
    jobs_path = folder / "jobs.parquet"
    if not jobs_path.is_file():
        raise InputError(f"run {run_id} stored no jobs table (its kind keeps none)", field="--run")
    jobs = pq.read_table(jobs_path).to_pandas()
    mine = jobs[jobs["job_id"] == job_id]
    if mine.empty:
        known = f"ids {jobs['job_id'].min()}..{jobs['job_id'].max()}"
        raise InputError(f"run {run_id} has no job {job_id} ({known})", field="--job")
    job = mine.iloc[0]
    placements_path = folder / "placements.parquet"
    placements = pq.read_table(placements_path).to_pandas() if placements_path.is_file() else None
    axis = read_description(root, run_id).get("axis")
    fill = axis == ARRIVED_AXIS
    story = _fill_story if fill else _timed_story
    verdicts = story(job, jobs, placements)
    return JobStory(run_id, job_id, tuple(verdicts), NOT_RECORDED_FILL if fill else NOT_RECORDED)


def _t(seconds: float) -> str:
    if seconds >= 7200:
        return f"{seconds:,.0f} s ({seconds / 3600:.2f} h)"
    return f"{seconds:,.1f} s"


def _where(job: Any) -> str:
    slots = job["gpus"] if "gpus" in job and job["gpus"] is not None else ""
    gpus = slots.split() if isinstance(slots, str) else list(slots)  # older stores: a list
    node = int(job["node"]) if "node" in job and not pd.isna(job["node"]) else -1
    model = f" ({job['gpu_model']})" if job.get("gpu_model") else ""
    if node < 0:
        return f"on {job['gpu_model'] or 'its GPUs'} (GPU slots not recorded by this simulator)"
    parts = int(job["parts"]) if "parts" in job and not pd.isna(job["parts"]) else 1
    more = f", and {parts - 1} more node(s) of its gang" if parts > 1 else ""
    return f"on node {node}, GPU slot(s) {', '.join(map(str, gpus)) or '-'}{model}{more}"


def _ask(job: Any) -> str:
    if int(job["num_gpu"]) == 0:
        return "no GPU"
    return f"{int(job['num_gpu'])} GPU(s) x {int(job['gpu_milli'])} milli"


def _fill_story(job: Any, _jobs: pd.DataFrame, _placements: pd.DataFrame | None) -> list[str]:
    lines = [
        f"arrived as task {int(job['job_id'])} of the replay ({job['name']}, {job['kind']}) at "
        f"{job['arrived_pct']:.2f}% arrived workload, asking {_ask(job)}"
    ]
    if job["status"] == "rejected":
        words = REASON_WORDS.get(job["reason"], "")
        lines.append(
            f"failed at once, filter verdict {job['reason']}"
            + (f" ({words})" if words else "")
            + "; a fill replay neither queues nor retries"
        )
    else:
        lines.append(f"placed at once {_where(job)}; tasks of a fill replay never leave")
    return lines


def _timed_story(job: Any, jobs: pd.DataFrame, placements: pd.DataFrame | None) -> list[str]:
    arrival, start, finish = float(job["arrival_s"]), float(job["start_s"]), float(job["finish_s"])
    lines = [f"t={_t(arrival)}: arrived ({job['job_type']}), asking {_ask(job)}"]
    started = math.isfinite(start)
    if started and start > arrival:
        earlier = (jobs["arrival_s"] < arrival) | (
            (jobs["arrival_s"] == arrival) & (jobs["job_id"] < job["job_id"])
        )
        # Ahead of it in the queue: arrived first (or together, with a lower id) and not
        # running yet when it arrived (NaN start: never started).
        ahead = jobs[earlier & ~(jobs["start_s"] <= arrival)]
        ids = ", ".join(map(str, ahead["job_id"][:8])) + (", ..." if len(ahead) > 8 else "")
        lines.append(
            f"queued {_t(start - arrival)}; {len(ahead)} job(s) were ahead of it in the queue"
            + (f" ({ids})" if len(ahead) else "")
        )
        freed = _freed_by(job, start, placements)
        if freed:
            lines.append(f"its GPUs came free when job(s) {', '.join(map(str, freed))} ended")
    if started:
        lines.append(f"t={_t(start)}: started {_where(job)}")
    suspended = float(job.get("suspended_s", 0) or 0)
    handovers = int(job.get("handovers", 0) or 0)
    migrations = int(job.get("migrations", 0) or 0)
    if suspended > 0 or handovers > 0:
        lines.append(
            f"shared its GPU: suspended {_t(suspended)} in all, resumed {handovers} time(s)"
        )
    if migrations:
        lines.append(f"migrated {migrations} time(s)")
    thrash = float(job.get("thrashing_s", 0) or 0)
    if thrash > 0:
        lines.append(f"thrashed {_t(thrash)} (working sets over GPU memory)")
    status = job["status"]
    if status == "completed":
        lines.append(f"t={_t(finish)}: completed; JCT {_t(finish - arrival)}")
    elif status == "running":
        lines.append("still running when the run stopped")
    elif status == "queued":
        lines.append(f"still queued when the run stopped: {job['reason'] or 'no verdict kept'}")
    else:
        lines.append(f"rejected: {job['reason']}")
    return lines


def _freed_by(job: Any, start: float, placements: pd.DataFrame | None) -> list[int]:
    if placements is None or placements.empty:
        return []
    mine = placements[placements["job_id"] == job["job_id"]]
    if mine.empty:
        return []
    others = placements[
        placements["gpu"].isin(mine["gpu"])
        & (placements["job_id"] != job["job_id"])
        & ((placements["end"] - start).abs() <= 1e-6 * max(1.0, abs(start)))
    ]
    return sorted({int(j) for j in others["job_id"]})
