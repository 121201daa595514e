"""GPU check of the share runtime (needs a CUDA GPU and PyTorch; NOT run in CI).

Two PyTorch processes whose working sets together exceed GPU memory ("big": each takes
``--big-frac`` of the GPU, default 0.6): run one after the other, together without the
runtime (expect OOM or thrashing), and together under ``gpumosaic share`` with
anti-thrashing on at TQ 30, 60 and 1000 s; then two that fit ("small", 0.3 each) under
``auto`` (they should overlap). Prints total times, hand-overs, and what our nvshare model
predicts for the same setup (solo time = measured serial / 2), as a table and JSON.

    python bench/gpu_share_check.py [--solo-s 45] [--tqs 30,60,1000] [--out gpu_share.json]

Each job touches its whole working set every iteration (an in-place update of every
chunk) and does a matmul; iterations are calibrated so that one job alone runs ~solo-s.

``--serve`` checks the runtime under the round service instead (``serve --sharing
nvshare:tq=S,anti_thrashing=on,mem_cap=on``, docs/share.md "Live sharing under serve"):
an in-process service on local Ray with the first GPU declared as ``--model``, two
``examples/pytorch_train.py`` jobs at 500 milli submitted together (they share GPU 0
under the daemon), one at 1000 milli after them (not shared), and a 250-milli probe that
prints what ``torch.cuda.mem_get_info`` reports under the cap and whether allocating more
than its share fails. Prints one JSON object (jobs with shared / handovers / lock_grants,
JCTs, the probe's numbers):

    PYTHONPATH=src RAY_AUTH_MODE=disabled python bench/gpu_share_check.py --serve \
        [--steps 3000] [--serve-tq 2] [--model A100] [--out gpu_share_serve.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

JOB = r"""
import sys, time, torch
frac, iters = float(sys.argv[1]), int(sys.argv[2])
free, total = torch.cuda.mem_get_info()
n = int(frac * total / 4 / 2**24)  # float32 chunks of 64 MiB
chunks = [torch.ones(2**24, device="cuda") for _ in range(max(1, n))]
a = torch.randn(4096, 4096, device="cuda")
torch.cuda.synchronize()
t0 = time.time()
for _ in range(iters):
    for c in chunks:
        c.mul_(1.0000001)
    a = torch.tanh(a @ a)
torch.cuda.synchronize()
print(time.time() - t0, flush=True)
"""


def gpu_memory_mib() -> float:
    out = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.cuda.mem_get_info()[1] / 2**20)"],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout)


def run_jobs(frac: float, iters: int, n: int, prefix: list[str], timeout: float) -> dict:
    """Start n jobs at once (each prefixed by ``prefix``); total wall time and outcomes."""
    t0 = time.time()
    procs = [
        subprocess.Popen(
            [*prefix, sys.executable, "-c", JOB, str(frac), str(iters)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(n)
    ]
    outcomes = []
    for p in procs:
        try:
            _, err = p.communicate(timeout=max(1.0, timeout - (time.time() - t0)))
            ok = p.returncode == 0
            outcomes.append("ok" if ok else ("OOM" if "out of memory" in err else "failed"))
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            outcomes.append("timeout")
    return {"total_s": time.time() - t0, "outcomes": outcomes}


def calibrate(frac: float, solo_s: float) -> int:
    probe = run_jobs(frac, 5, 1, [], 600)
    per_iter = probe["total_s"] / 5  # includes start-up: a slight overestimate
    return max(5, int(solo_s / per_iter))


def model_prediction(setup: str, tq: float | None, ws_mib: float, solo_s: float, mem: float):
    from gpumosaic.sharing import NvshareModel, SharedJob

    jobs = [SharedJob(f"j{k}", solo_s, 1.0, ws_mib) for k in "ab"]
    model = NvshareModel(tq_s=tq or 30.0, anti_thrashing=setup != "off")
    if setup == "serial":
        return sum(model.simulate([j], mem).makespan_s for j in jobs)
    return model.simulate(jobs, mem).makespan_s


EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pytorch_train.py"

# A lease job that reports what the capped driver says and tries to allocate past its
# share (it holds the lease only for its few steps).
PROBE = r"""
import json, torch
from gpumosaic.lease import Lease
lease = Lease.from_env()
free, total = torch.cuda.mem_get_info()
try:
    x = torch.empty(int(total * 1.2) // 4, dtype=torch.float32, device="cuda")
    over = "allocated"
except torch.cuda.OutOfMemoryError:
    over = "out of memory"
for step in lease.steps(start=0):
    pass
lease.save({"step": lease.total_steps})
print("PROBE " + json.dumps({"free_mib": free / 2**20, "total_mib": total / 2**20,
                              "beyond_share": over}), flush=True)
"""


def serve_check(args: argparse.Namespace) -> None:
    """The runtime under ``gpumosaic serve --sharing nvshare:...`` (see module doc)."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    from gpumosaic.run.serve import ServeDescription, Service, connect_ray
    from gpumosaic.runtime.api.client import ServiceClient

    def wait(client: ServiceClient, ids: list[int]) -> dict[int, dict]:  # type: ignore[type-arg]
        give_up = time.monotonic() + args.timeout_s
        while True:
            rows = {j["id"]: j for j in client.jobs() if j["id"] in ids}
            if all(r["state"] in ("done", "failed", "cancelled") for r in rows.values()):
                return rows
            if time.monotonic() > give_up:
                raise SystemExit(f"jobs not done after {args.timeout_s:g} s: {rows}")
            time.sleep(0.5)

    train = f"{sys.executable} {EXAMPLE}"
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "probe.py"
        probe.write_text(PROBE)
        config = ServeDescription(
            cluster=f"{args.model}:1",
            round_s=args.round_s,
            port=0,
            state=f"{tmp}/state.db",
            policy="max_min_fairness",
            placement="bestfit",
            sharing=f"nvshare:tq={args.serve_tq:g},anti_thrashing=on,mem_cap=on",
        )
        service = Service(config, connect_ray(config))
        service.start()
        client = ServiceClient(service.url)
        t0 = time.time()
        halves = client.submit_batch(
            [
                {"command": train, "steps": args.steps, "gpu_milli": 500, "name": n}
                for n in ("a-500", "b-500")
            ]
        )
        whole = client.submit({"command": train, "steps": args.steps, "name": "c-1000"})
        probe_id = client.submit(
            {"command": f"{sys.executable} {probe}", "steps": 5, "gpu_milli": 250, "name": "probe"}
        )
        rows = wait(client, [*halves, whole, probe_id])
        makespan = time.time() - t0
        assert service.sharing is not None
        service.sharing.wait_reports()
        rows = {j["id"]: j for j in client.jobs() if j["id"] in rows}
        probe_log = Path(service.log_path(probe_id)).read_text()
        service.stop()
        ray.shutdown()
    probe_out = next(
        (json.loads(line[6:]) for line in probe_log.splitlines() if line.startswith("PROBE ")),
        {"error": probe_log[-400:]},
    )
    result = {
        "gpu": subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip(),
        "sharing": config.sharing,
        "steps": args.steps,
        "makespan_s": round(makespan, 1),
        "jobs": [
            {
                k: r[k]
                for k in (
                    "name",
                    "state",
                    "gpu_milli",
                    "shared",
                    "handovers",
                    "lock_grants",
                    "steps_per_s",
                    "gpu_index",
                )
            }
            | {
                "jct_s": round(r["finished_at"] - r["submitted_at"], 1)
                if r["finished_at"]
                else None
            }
            for r in rows.values()
        ],
        "probe_250_milli": probe_out,
    }
    print(json.dumps(result, indent=1))
    args.out.write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", action="store_true", help="check the runtime under serve")
    parser.add_argument("--steps", type=float, default=3000, help="--serve: steps per job")
    parser.add_argument("--serve-tq", type=float, default=2.0, help="--serve: the TQ, s")
    parser.add_argument("--model", default="A100", help="--serve: the GPU's declared model")
    parser.add_argument("--round-s", type=float, default=20.0, help="--serve: round length")
    parser.add_argument("--timeout-s", type=float, default=600.0, help="--serve: give up after")
    parser.add_argument("--solo-s", type=float, default=45.0)
    parser.add_argument("--tqs", default="30,60,1000")
    parser.add_argument("--big-frac", type=float, default=0.6)
    parser.add_argument("--small-frac", type=float, default=0.3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.serve:
        args.out = args.out or Path("gpu_share_serve.json")
        serve_check(args)
        return
    args.out = args.out or Path("gpu_share.json")
    mem = gpu_memory_mib()
    gm = [sys.executable, "-c", "from gpumosaic.cli import main; main()"]
    rows = []
    for size, frac in (("big", args.big_frac), ("small", args.small_frac)):
        iters = calibrate(frac, args.solo_s)
        ws = frac * mem
        serial = [run_jobs(frac, iters, 1, [], 1800) for _ in range(2)]
        serial_s = sum(r["total_s"] for r in serial)
        solo = serial_s / 2
        rows.append(
            {
                "job": size,
                "setup": "serial",
                "tq_s": None,
                "total_s": serial_s,
                "outcomes": serial[0]["outcomes"] + serial[1]["outcomes"],
                "handovers": 0,
                "model_s": model_prediction("serial", None, ws, solo, mem),
            }
        )
        r = run_jobs(frac, iters, 2, [], 6 * serial_s)
        rows.append(
            {
                "job": size,
                "setup": "together, no runtime",
                "tq_s": None,
                **r,
                "handovers": 0,
                "model_s": None,
            }
        )
        setups = [("on", float(t)) for t in args.tqs.split(",")] if size == "big" else []
        setups.append(("auto", 30.0))
        for mode, tq in setups:
            with tempfile.TemporaryDirectory() as sock_dir:
                events = Path(sock_dir) / "events.jsonl"
                daemon = subprocess.Popen(
                    [
                        *gm,
                        "share",
                        "daemon",
                        "--socket-dir",
                        sock_dir,
                        "--tq",
                        str(tq),
                        "--anti-thrashing",
                        mode,
                        "--event-log",
                        str(events),
                    ]
                )
                while not (Path(sock_dir) / "gpu0.sock").exists():
                    time.sleep(0.1)
                r = run_jobs(
                    frac,
                    iters,
                    2,
                    [*gm, "share", "run", "--socket-dir", sock_dir, "--"],
                    6 * serial_s,
                )
                daemon.terminate()
                daemon.wait(30)
                grants = [
                    json.loads(x)["pid"]
                    for x in events.read_text().splitlines()
                    if json.loads(x)["event"] == "LOCK_OK"
                ]
                handovers = sum(1 for a, b in itertools.pairwise(grants) if a != b)
            setup = "on" if mode == "on" else "auto"
            model = model_prediction("on", tq, ws, solo, mem) if mode == "on" else None
            rows.append(
                {
                    "job": size,
                    "setup": f"runtime {setup}",
                    "tq_s": tq,
                    **r,
                    "handovers": handovers,
                    "model_s": model,
                }
            )
    gpu = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.cuda.get_device_name())"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    print(f"GPU: {gpu}, {mem:.0f} MiB")
    head = ("job", "setup", "TQ", "total s", "model s", "hand-overs")
    print(
        f"{head[0]:6} {head[1]:22} {head[2]:>6} {head[3]:>9} {head[4]:>9} {head[5]:>10}  outcomes"
    )
    for row in rows:
        tq = "" if row["tq_s"] is None else f"{row['tq_s']:g}"
        model = "" if row["model_s"] is None else f"{row['model_s']:.0f}"
        print(
            f"{row['job']:6} {row['setup']:22} {tq:>6} {row['total_s']:9.0f} {model:>9} "
            f"{row['handovers']:>10}  {','.join(row['outcomes'])}"
        )
    args.out.write_text(json.dumps({"gpu": gpu, "memory_mib": mem, "rows": rows}, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
