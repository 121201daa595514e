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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--solo-s", type=float, default=45.0)
    parser.add_argument("--tqs", default="30,60,1000")
    parser.add_argument("--big-frac", type=float, default=0.6)
    parser.add_argument("--small-frac", type=float, default=0.3)
    parser.add_argument("--out", type=Path, default=Path("gpu_share.json"))
    args = parser.parse_args()
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
