"""GPU check of the round service (run it on a machine with an NVIDIA GPU and PyTorch).

Starts ``gpumosaic serve`` in-process on local Ray with the machine's first GPU declared
as ``--model`` (default A100: gpumosaic has no H100 power profile yet), then:

1. alone: one ``examples/pytorch_train.py`` job on the whole GPU, then one at 500 milli
   alone: steps/s of each;
2. shared: three jobs at once, two at 500 milli (they share GPU 0) and one at 1000 milli
   (waits for or takes turns on the GPU): steps/s while sharing and JCTs.

Prints one JSON object: the GPU (nvidia-smi name), per-job steps/s alone vs shared, JCTs,
and the placement (GPU index) each job got.

    PYTHONPATH=src RAY_AUTH_MODE=disabled python bench/gpu_check_live.py [--steps 3000] \
        [--sharing nvshare:tq=2,anti_thrashing=on,mem_cap=on]

With ``--sharing`` the two 500-milli jobs run under the share runtime (interposer and a
share daemon per GPU, docs/share.md "Live sharing under serve") and each job's entry
shows ``shared``, ``handovers`` and ``lock_grants``; bench/gpu_share_check.py --serve
checks the memory cap too.

3. sim vs live with real jobs (``sim_vs_live`` in the JSON; ``--check sim-vs-live`` runs
   only this): ``examples/pytorch_train.py`` is profiled alone on the GPU for
   ``--profile-steps`` steps under a service (its isolated rate R, steps/s, measured from
   its lease reports, not taken from Gavel's table); then ``--jobs`` copies of it, of
   ``--job-s`` x (1, 1.5, 2, ...) seconds at R, run through ``sim-vs-live``'s own
   ``compare`` at time scale 1: the simulator sees a job list in ``duration_s`` (steps /
   R, 1 step/s on every model) and the live side the real job with steps = duration x R.
   ``--dry-run`` prints that plan (at ``--assume-rate``) and starts nothing.

Without PyTorch or a CUDA GPU it prints one line saying which is missing
(``skipped: ...``) and exits 0.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpumosaic.model.job import JobSpec
    from gpumosaic.run.description import RunDescription
    from gpumosaic.runtime.jobs.submission import JobSubmission

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pytorch_train.py"
CHECKS = ("all", "share", "sim-vs-live")


def missing_gpu() -> str | None:
    """Why the check cannot run here (no PyTorch, no CUDA GPU), or None."""
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed (pip install torch)"
    if not torch.cuda.is_available():
        return "PyTorch sees no CUDA GPU"
    return None


def gpu_name() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        )
        return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown (nvidia-smi failed)"


def run_jobs(client, jobs: list[dict], timeout_s: float) -> dict[int, dict]:  # type: ignore[no-untyped-def]
    ids = [client.submit(j) for j in jobs]
    give_up = time.monotonic() + timeout_s
    while True:
        rows = {j["id"]: j for j in client.jobs() if j["id"] in ids}
        if all(r["state"] in ("done", "failed", "cancelled") for r in rows.values()):
            return rows
        if time.monotonic() > give_up:
            raise SystemExit(f"jobs not done after {timeout_s:g} s: {rows}")
        time.sleep(0.5)


def positive(text: str) -> float:
    value = float(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/gpu_check_live.py")
    parser.add_argument("--check", choices=CHECKS, default="all")
    parser.add_argument("--steps", type=positive, default=3000)
    parser.add_argument("--model", default="A100")  # gpumosaic has no H100 profile yet
    parser.add_argument("--round-s", type=positive, default=20.0)
    parser.add_argument("--timeout-s", type=positive, default=240.0)
    parser.add_argument("--sharing", default=None, help="e.g. nvshare:tq=2,anti_thrashing=on")
    parser.add_argument("--jobs", type=int, default=3, help="sim vs live: real jobs")
    parser.add_argument("--job-s", type=positive, default=40.0, help="shortest job, seconds")
    parser.add_argument("--profile-steps", type=positive, default=2000)
    parser.add_argument("--policy", default="max_min_fairness_perf")
    parser.add_argument("--dry-run", action="store_true", help="print the sim-vs-live plan")
    parser.add_argument("--assume-rate", type=positive, default=500.0, help="--dry-run's R")
    args = parser.parse_args(argv)
    if not 1 <= args.jobs <= 20:
        parser.error(f"--jobs must be 1..20, got {args.jobs}")
    from gpumosaic.errors import InputError
    from gpumosaic.model.gpu import UnknownGpuModelError, gpu_model

    try:
        args.model = gpu_model(args.model).name
    except (UnknownGpuModelError, InputError) as err:
        parser.error(f"--model: {err}")
    return args


# ---- sim vs live with real jobs ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class RealJobs:
    """``sim-vs-live``'s submitter for real jobs: the workload's jobs are in seconds at
    1 step/s (a ``duration_s`` job list); the real job runs ``duration x rate`` steps at
    its own measured ``rate``."""

    command: str
    steps_per_s: float

    def submission(self, job: JobSpec, checkpoint_every_s: float) -> JobSubmission:
        from gpumosaic.runtime.jobs.submission import JobSubmission

        return JobSubmission(
            command=self.command,
            steps=float(round(job.work * self.steps_per_s)),
            gpus=max(job.num_gpu, 1),
            gpu_milli=job.gpu_milli,
            name=job.name or f"w{job.id}",
            env={"GPUMOSAIC_CHECKPOINT_EVERY_S": repr(float(checkpoint_every_s))},
        )


def job_list(args: argparse.Namespace, steps_per_s: float, path: Path) -> list[dict[str, float]]:
    """``--jobs`` jobs at t = 0 of ``--job-s`` x (1, 1.5, 2, ...) seconds at the measured
    rate, written as a ``duration_s`` job list (what the simulator reads)."""
    rows = []
    for i in range(args.jobs):
        steps = round(args.job_s * (1 + 0.5 * i) * steps_per_s)
        rows.append({"arrival_s": 0.0, "num_gpu": 1, "duration_s": steps / steps_per_s})
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["arrival_s", "num_gpu", "duration_s", "name"])
        for i, r in enumerate(rows):
            w.writerow([r["arrival_s"], r["num_gpu"], repr(r["duration_s"]), f"torch-{i}"])
    return rows


def description_for(args: argparse.Namespace, workload: Path) -> RunDescription:
    from gpumosaic.run.description import RunDescription

    return RunDescription(
        cluster=f"{args.model}:1",
        workload=str(workload),
        policy=args.policy,
        placement="bestfit",
        mechanism="rounds",
        round_s=args.round_s,
    )


def dry_run(args: argparse.Namespace) -> dict[str, object]:
    """The sim-vs-live plan at ``--assume-rate``: the job list, the run description and
    each job's submission, built by the code the real check uses; nothing starts."""
    from gpumosaic.experiments.sim_vs_live.rounds import rounds_description
    from gpumosaic.run.build import build_parts

    command = f"{sys.executable} {EXAMPLE}"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "jobs.csv"
        rows = job_list(args, args.assume_rate, path)
        description = description_for(args, path)
        parts = build_parts(rounds_description(description))
        submitter = RealJobs(command, args.assume_rate)
        subs = [submitter.submission(j, 60.0).model_dump() for j in parts.workload.jobs]
    return {
        "dry_run": True,
        "assumed_steps_per_s": args.assume_rate,
        "description": description.to_json(),
        "jobs": rows,
        "submissions": subs,
    }


def profile(args: argparse.Namespace, command: str, tmp: str) -> float:
    """The job's isolated rate on the GPU: one job alone under a service, its steps/s as
    the service measured it from its lease reports."""
    from gpumosaic.run.serve import ServeDescription, Service, connect_ray
    from gpumosaic.runtime.api.client import ServiceClient

    config = ServeDescription(
        cluster=f"{args.model}:1",
        round_s=args.round_s,
        port=0,
        state=f"{tmp}/profile.db",
        policy="fifo",
        placement="bestfit",
    )
    service = Service(config, connect_ray(config))
    service.start()
    try:
        client = ServiceClient(service.url)
        job = {"command": command, "steps": args.profile_steps, "name": "profile"}
        (row,) = run_jobs(client, [job], args.timeout_s).values()
    finally:
        service.stop()
    if row["state"] != "done" or not row["steps_per_s"]:
        raise SystemExit(f"the profiling job did not finish with a rate: {row}")
    return float(row["steps_per_s"])


def sim_vs_live_real(args: argparse.Namespace) -> dict[str, object]:
    from gpumosaic.experiments.sim_vs_live.inputs import SimVsLiveOptions
    from gpumosaic.experiments.sim_vs_live.rounds import compare

    command = f"{sys.executable} {EXAMPLE}"
    with tempfile.TemporaryDirectory() as tmp:
        rate = profile(args, command, tmp)
        path = Path(tmp) / "jobs.csv"
        rows = job_list(args, rate, path)
        lines: list[str] = []

        def say(line: str) -> None:
            lines.append(line)
            print(line, file=sys.stderr, flush=True)

        comparison = compare(
            SimVsLiveOptions(
                description_for(args, path), time_scale=1.0, wall_limit_s=4 * args.timeout_s
            ),
            say=say,
            state_dir=Path(tmp) / "state",
            submitter=RealJobs(command, rate),
        )
    return {
        "profiled_steps_per_s": rate,
        "jobs": rows,
        **comparison.to_json(),
        "per_job": [
            {"job_id": d.job_id, "sim_jct_s": d.sim_jct_s, "live_jct_s": d.live_jct_s}
            for d in comparison.jobs
        ],
        "log": lines,
    }


# ---- the check ---------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.dry_run:
        print(json.dumps(dry_run(args), indent=1))
        return
    missing = missing_gpu()
    if missing is not None:
        print(f"skipped: {missing}; bench/gpu_check_live.py needs PyTorch on a CUDA GPU")
        return
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    report: dict[str, object] = {"gpu": gpu_name()}
    if args.check in ("all", "share"):
        report.update(share_check(args))
    if args.check in ("all", "sim-vs-live"):
        import ray

        try:
            report["sim_vs_live"] = sim_vs_live_real(args)
        finally:
            ray.shutdown()
    print(json.dumps(report, indent=1))


def share_check(args: argparse.Namespace) -> dict[str, object]:
    """Checks 1 and 2 (module doc)."""
    import ray

    from gpumosaic.run.serve import ServeDescription, Service, connect_ray
    from gpumosaic.runtime.api.client import ServiceClient

    command = f"{sys.executable} {EXAMPLE}"
    with tempfile.TemporaryDirectory() as tmp:
        config = ServeDescription(
            cluster=f"{args.model}:1",
            round_s=args.round_s,
            port=0,
            state=f"{tmp}/state.db",
            policy="max_min_fairness",
            placement="bestfit",
            sharing=args.sharing,
        )
        service = Service(config, connect_ray(config))
        service.start()
        client = ServiceClient(service.url)

        def job(name: str, milli: int) -> dict:  # type: ignore[type-arg]
            return {"command": command, "steps": args.steps, "gpu_milli": milli, "name": name}

        alone_full = run_jobs(client, [job("alone-1000", 1000)], args.timeout_s)
        alone_half = run_jobs(client, [job("alone-500", 500)], args.timeout_s)
        t0 = time.time()
        shared = run_jobs(
            client, [job("a-500", 500), job("b-500", 500), job("c-1000", 1000)], args.timeout_s
        )
        if service.sharing is not None:  # the last hand-overs the daemons logged
            service.sharing.wait_reports()
            shared = {j["id"]: j for j in client.jobs() if j["id"] in shared}
        service.stop()
        ray.shutdown()

    def summary(rows: dict[int, dict]) -> list[dict]:  # type: ignore[type-arg]
        return [
            {
                "name": r["name"],
                "state": r["state"],
                "steps_per_s": r["steps_per_s"],
                "jct_s": round(r["finished_at"] - r["submitted_at"], 1)
                if r["finished_at"]
                else None,
                "gpu_index": r["gpu_index"],
                "attained_gpu_s": round(r["attained_s"], 1),
                "shared": r["shared"],
                "handovers": r["handovers"],
                "lock_grants": r["lock_grants"],
            }
            for r in rows.values()
        ]

    return {
        "sharing": args.sharing,
        "steps": args.steps,
        "alone": summary(alone_full) + summary(alone_half),
        "shared": summary(shared),
        "shared_makespan_s": round(time.time() - t0, 1),
    }


if __name__ == "__main__":
    main()
