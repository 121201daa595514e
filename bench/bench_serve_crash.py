"""Crash cost of ``gpumosaic serve`` (issue 23's serve target): SIGKILL mid-run twice,
0 lost, 0 run twice, steps redone <= one checkpoint interval per job.

A local Ray (loopback, logical GPUs, no dashboard, auth off) is started by this process
and outlives the service; ``gpumosaic serve`` runs as its own process on a temporary
``--state`` against it. Each job is a real process that uses ``gpumosaic.lease`` with
``steps(save=...)`` (a short ``GPUMOSAIC_CHECKPOINT_EVERY_S``): one step sleeps
``--step-s`` and the job appends one line per step with its pid and the time to its own
log. The service is SIGKILLed mid-run, restarted on the same state, SIGKILLed again,
restarted, and the run waits (bounded) for every job to end. Then:

- lost: submitted ids not ``done`` at the end;
- run twice: a job with two processes whose step lines overlap in time, or two leases
  in the state DB whose [started_at, ended_at) overlap;
- redone: per job, steps executed in total (step lines) minus steps needed; per
  restart, steps a new process executed again that an earlier one had executed. One
  checkpoint interval is ``checkpoint_every_s / step_s`` steps (the most a job can step
  in it: a step sleeps at least ``step_s``). ``target_met``: 0 lost, 0 run twice, and no
  restart made any job redo more than one interval (each of the two crashes may cost a
  job up to one interval, so a job's total may reach two).

    PYTHONPATH=src python bench/bench_serve_crash.py [--jobs 10] [--gpus 4] [--json]
        [--mechanism gandiva:quantum=5,migration=on]
"""

from __future__ import annotations

import argparse
import atexit
import itertools
import json
import logging
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")

JOB = """
import os, sys, time
from gpumosaic.lease import Lease

log = open(os.path.join(sys.argv[1], f"job-{os.environ['GPUMOSAIC_JOB_ID']}.log"), "a", buffering=1)
step_s = float(sys.argv[2])
lease = Lease.from_env()
state = lease.load() or {"step": 0}
pid = os.getpid()
log.write(f"start {pid} {state['step']} {time.time():.6f}\\n")
for step in lease.steps(start=state["step"], save=lambda: dict(state)):
    time.sleep(step_s)
    state["step"] = step + 1
    log.write(f"step {pid} {step} {time.time():.6f}\\n")
lease.save(dict(state))
log.write(f"end {pid} {state['step']} {time.time():.6f}\\n")
"""


@dataclass(frozen=True, slots=True)
class JobOutcome:
    job_id: int
    state: str
    steps_needed: int
    steps_executed: int
    redone: int
    max_redo_per_restart: int
    processes: int
    overlapping_processes: bool
    after_kill: int  # steps processes executed after a SIGKILL of serve, before stopping


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http(port: int, method: str, path: str, body: object = None) -> object:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=data,
        method=method,
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read() or b"null")


def wait_up(port: int, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"gpumosaic serve exited with {proc.returncode}")
        try:
            http(port, "GET", "/healthz")
            return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"gpumosaic serve not up within {timeout_s} s")


def serve(args: argparse.Namespace, state: Path, port: int, gcs: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": SRC}
    cmd = [
        sys.executable, "-m", "gpumosaic.cli", "serve", "--ray-address", gcs,
        "--cluster", f"v100:{args.gpus}", "--round-s", str(args.round_s), "--grace-s", "2",
        "--state", str(state), "--port", str(port),
    ]  # fmt: skip
    if args.mechanism == "rounds":
        cmd += ["--policy", "max_min_fairness"]
    else:  # gandiva[:options]: its own queue order (fifo) and placement
        cmd += ["--mechanism", args.mechanism, "--policy", "fifo"]
    out = open(state.parent / f"serve-{time.monotonic_ns()}.log", "wb")  # noqa: SIM115
    return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)


def jobs_states(port: int) -> dict[int, str]:
    rows = http(port, "GET", "/v1/jobs?limit=1000")
    assert isinstance(rows, list)
    return {int(r["id"]): str(r["state"]) for r in rows}


def analyse(
    job_id: int, state: str, needed: int, logdir: Path, kill_epochs: list[float]
) -> JobOutcome:
    steps_by_pid: dict[int, list[tuple[int, float]]] = defaultdict(list)
    order: list[int] = []  # pids in the order they started
    started: dict[int, float] = {}
    path = logdir / f"job-{job_id}.log"
    lines = path.read_text().splitlines() if path.exists() else []
    for line in lines:
        parts = line.split()
        if len(parts) != 4:
            continue  # a line cut by a kill
        kind, pid = parts[0], int(parts[1])
        if kind == "start" and pid not in order:
            order.append(pid)
            started[pid] = float(parts[3])
        if kind == "step":
            steps_by_pid[pid].append((int(parts[2]), float(parts[3])))
    executed = sum(len(s) for s in steps_by_pid.values())
    seen: set[int] = set()
    max_redo = 0
    for pid in order:
        mine = {s for s, _ in steps_by_pid.get(pid, [])}
        max_redo = max(max_redo, len(mine & seen))
        seen |= mine
    spans = [(pid, min(t for _, t in s), max(t for _, t in s)) for pid, s in steps_by_pid.items()]
    overlap = any(a[1] < b[2] and b[1] < a[2] for a, b in itertools.combinations(spans, 2))
    after_kill = 0
    for pid, steps in steps_by_pid.items():
        kills = [k for k in kill_epochs if k > started.get(pid, 0.0)]
        if kills:
            after_kill += sum(1 for _, t in steps if t > kills[0])
    return JobOutcome(
        job_id,
        state,
        needed,
        executed,
        executed - needed,
        max_redo,
        len(order),
        overlap,
        after_kill,
    )


def lease_overlaps(state: Path) -> int:
    with sqlite3.connect(f"file:{state}?mode=ro", uri=True) as db:
        rows = db.execute(
            "SELECT job_id, started_at, COALESCE(ended_at, 1e18) FROM leases "
            "ORDER BY job_id, started_at"
        ).fetchall()
    return sum(1 for a, b in itertools.pairwise(rows) if a[0] == b[0] and a[2] > b[1])


def event_counts(state: Path) -> dict[str, int]:
    """How many of each event the service recorded (Gandiva's suspensions, migrations
    and packs among them), over all its lives."""
    with sqlite3.connect(f"file:{state}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT kind, COUNT(*) FROM events GROUP BY kind").fetchall()
    return {str(kind): int(n) for kind, n in rows}


def stop(proc: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--gpus", type=int, default=4)
    parser.add_argument("--steps", type=int, default=1200, help="steps per job")
    parser.add_argument("--step-s", type=float, default=0.02, help="seconds one step sleeps")
    parser.add_argument("--checkpoint-every-s", type=float, default=2.0)
    parser.add_argument("--round-s", type=float, default=6.0)
    parser.add_argument(
        "--mechanism",
        default="rounds",
        help="serve's --mechanism: rounds, or gandiva[:quantum=S,migration=on,...]",
    )
    parser.add_argument("--kills-at-s", type=float, nargs=2, default=(25.0, 55.0),
                        help="SIGKILLs, seconds after the submissions")  # fmt: skip
    parser.add_argument("--timeout-s", type=float, default=420.0, help="bound on the whole run")
    parser.add_argument("--keep", action="store_true", help="keep the state and job logs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    os.environ["RAY_AUTH_MODE"] = "disabled"
    os.environ["PYTHONPATH"] = SRC  # the jobs' workers inherit it from Ray
    import ray

    from gpumosaic.runtime.executors.ray_connect import init_local_ray

    tmp = Path(tempfile.mkdtemp(prefix="gpumosaic-crash-"))
    state = tmp / "state" / "state.db"
    state.parent.mkdir()
    logdir = tmp / "jobs"
    logdir.mkdir()
    script = tmp / "job.py"
    script.write_text(JOB)
    port = free_port()
    proc: subprocess.Popen[bytes] | None = None
    began = time.monotonic()
    kills: list[float] = []
    kill_epochs: list[float] = []
    try:
        init_local_ray(  # loopback only
            num_cpus=2,
            num_gpus=args.gpus,
            resources={"gpumosaic_model_V100": args.gpus},
            logging_level=logging.ERROR,
            log_to_driver=False,
        )
        gcs = ray.get_runtime_context().gcs_address
        proc = serve(args, state, port, gcs)
        wait_up(port, proc, 120)
        command = f"{sys.executable} {script} {logdir} {args.step_s}"
        env = {"GPUMOSAIC_CHECKPOINT_EVERY_S": str(args.checkpoint_every_s), "PYTHONPATH": SRC}
        body = {"command": command, "steps": args.steps, "env": env}
        reply = http(port, "POST", "/v1/jobs/batch", {"jobs": [body] * args.jobs})
        assert isinstance(reply, dict)
        ids = [int(i) for i in reply["ids"]]
        submitted = time.monotonic()
        for at in args.kills_at_s:
            while time.monotonic() < submitted + at:
                time.sleep(0.2)
            states = jobs_states(port)
            running = sum(1 for s in states.values() if s == "running")
            kill_epochs.append(time.time())
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            kills.append(round(time.monotonic() - submitted, 1))
            print(f"SIGKILL at {kills[-1]} s ({running} running)", file=sys.stderr)
            proc = serve(args, state, port, gcs)
            wait_up(port, proc, 120)
        end = began + args.timeout_s
        states = jobs_states(port)
        while time.monotonic() < end:
            states = jobs_states(port)
            if all(states.get(i) in ("done", "failed", "cancelled", "rejected") for i in ids):
                break
            time.sleep(1.0)
        wall = time.monotonic() - submitted
    finally:
        stop(proc)
        ray.shutdown()
        if not args.keep:
            atexit.register(shutil.rmtree, tmp, True)  # after the analysis below
    interval_steps = args.checkpoint_every_s / args.step_s
    outcomes = [analyse(i, states.get(i, "missing"), args.steps, logdir, kill_epochs) for i in ids]
    overlaps_db = lease_overlaps(state)
    load = os.getloadavg()
    result = {
        "jobs": args.jobs,
        "gpus": args.gpus,
        "steps_per_job": args.steps,
        "step_s": args.step_s,
        "checkpoint_every_s": args.checkpoint_every_s,
        "interval_steps": interval_steps,
        "round_s": args.round_s,
        "mechanism": args.mechanism,
        "events": event_counts(state),
        "kills_at_s": kills,
        "wall_s": round(wall, 1),
        "lost": sum(1 for o in outcomes if o.state != "done"),
        "run_twice_processes": sum(1 for o in outcomes if o.overlapping_processes),
        "run_twice_leases": overlaps_db,
        "redone_total": sum(o.redone for o in outcomes),
        "redone_max_per_job": max(o.redone for o in outcomes),
        "redo_max_per_restart": max(o.max_redo_per_restart for o in outcomes),
        "after_kill_max_per_job": max(o.after_kill for o in outcomes),
        "executed_total": sum(o.steps_executed for o in outcomes),
        "needed_total": args.steps * args.jobs,
        "per_job": [_asdict(o) for o in outcomes],
        "loadavg": [round(x, 2) for x in load],
        "state_dir": str(tmp) if args.keep else None,
    }
    result["target_met"] = (
        result["lost"] == 0
        and result["run_twice_processes"] == 0
        and result["run_twice_leases"] == 0
        and result["redo_max_per_restart"] <= interval_steps
    )
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{'job':>4} {'state':>8} {'needed':>7} {'executed':>8} {'redone':>7} "
          f"{'max/restart':>11} {'after kill':>10} {'procs':>5} {'twice':>5}")  # fmt: skip
    for o in outcomes:
        print(f"{o.job_id:>4} {o.state:>8} {o.steps_needed:>7} {o.steps_executed:>8} "
              f"{o.redone:>7} {o.max_redo_per_restart:>11} {o.after_kill:>10} {o.processes:>5} "
              f"{'yes' if o.overlapping_processes else 'no':>5}")  # fmt: skip
    print(
        f"lost {result['lost']}, run twice {result['run_twice_processes']} (processes) / "
        f"{overlaps_db} (leases), redone {result['redone_total']} of "
        f"{result['needed_total']} steps, max per job {result['redone_max_per_job']}, "
        f"max per restart {result['redo_max_per_restart']} (one interval = "
        f"{interval_steps:.0f} steps); {args.mechanism}, events {result['events']}; "
        f"kills at {kills} s, wall {wall:.0f} s, "
        f"load {result['loadavg']}; target {'met' if result['target_met'] else 'NOT met'}"
    )


def _asdict(o: JobOutcome) -> dict[str, object]:
    return {f: getattr(o, f) for f in JobOutcome.__dataclass_fields__}


if __name__ == "__main__":
    main()
