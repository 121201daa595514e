"""Benchmark of the share runtime on the CPU, against the stand-in libcuda (no GPU needed).

1. Interposer overhead per gated call: a C loop of N ``cuMemcpyDtoDAsync_v2`` calls
   (a zero-byte asynchronous copy, so the stand-in does almost nothing) without the
   interposer, with it but no daemon socket (pass-through), and with it under a daemon
   with anti-thrashing on (holding the lock) and off. Reports ns per call.
2. Hand-over latency through the daemon with 2 and 8 clients that all want the GPU:
   TQ 50 ms, kernels of 10 us (the holder must drain what it queued) and of 0 us (the
   protocol alone); from the daemon's event log, DROP_LOCK -> LOCK_RELEASED
   (the holder drains, synchronizes, answers) and DROP_LOCK -> next LOCK_OK (the whole
   hand-over as the next client sees it). Reports p50 and p99 in ms.

    .venv/bin/python bench/bench_share.py [--calls 2000000] [--clients 2,8] [--seconds 4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from gpumosaic.runtime.share.native import find_compiler, library_path

HERE = Path(__file__).parent
WORKER = HERE.parent / "tests" / "runtime" / "share" / "worker.py"


def start_daemon(sock_dir: Path, mode: str, tq: float, events: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-c", "from gpumosaic.cli import main; main()", "share", "daemon"]
    cmd += ["--socket-dir", str(sock_dir), "--tq", str(tq), "--anti-thrashing", mode]
    cmd += ["--event-log", str(events)]
    proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
    for _ in range(300):
        if (sock_dir / "gpu0.sock").exists():
            return proc
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("the daemon did not start")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(10)


def overhead(calls: int, tmp: Path, env: dict[str, str]) -> dict[str, float]:
    exe = tmp / "share_calls"
    subprocess.run(
        [find_compiler(), "-O2", "-o", str(exe), str(HERE / "share_calls.c"), "-ldl"], check=True
    )
    interposer = str(library_path("interposer"))

    def run(extra: dict[str, str]) -> float:
        out = subprocess.run(
            [str(exe), str(calls)], env={**env, **extra}, capture_output=True, text=True
        )
        if out.returncode != 0:
            raise SystemExit(f"share_calls failed: {out.stderr.strip()}")
        return float(out.stdout)

    result = {"native_ns": run({}), "passthrough_ns": run({"LD_PRELOAD": interposer})}
    for mode in ("on", "off"):
        sock_dir = tmp / f"ovh-{mode}"
        daemon = start_daemon(sock_dir, mode, 1000.0, tmp / f"ovh-{mode}.jsonl")
        try:
            result[f"gated_{mode}_ns"] = run(
                {"LD_PRELOAD": interposer, "GPUMOSAIC_SHARE_SOCKET": str(sock_dir / "gpu0.sock")}
            )
        finally:
            stop(daemon)
    result["overhead_on_ns"] = result["gated_on_ns"] - result["native_ns"]
    result["overhead_off_ns"] = result["gated_off_ns"] - result["native_ns"]
    return result


def handover(
    clients: int, kernel_us: int, seconds: float, tmp: Path, env: dict[str, str]
) -> dict[str, float]:
    sock_dir, events = tmp / f"ho-{clients}-{kernel_us}", tmp / f"ho-{clients}-{kernel_us}.jsonl"
    daemon = start_daemon(sock_dir, "on", 0.05, events)
    client_env = {
        **env,
        "LD_PRELOAD": str(library_path("interposer")),
        "GPUMOSAIC_SHARE_SOCKET": str(sock_dir / "gpu0.sock"),
        "FAKECUDA_KERNEL_US": str(kernel_us),
    }
    kernels = str(int(seconds * 1e5 / 4))  # ~seconds of 10 us kernels in all (or calls)
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), "--kernels", kernels],
            env=client_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(clients)
    ]
    try:
        for p in procs:
            p.wait(timeout=seconds * clients * 5 + 60)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        stop(daemon)
    drop_to_release, drop_to_grant = [], []
    drop_at = None
    for line in events.read_text().splitlines():
        e = json.loads(line)
        if e["event"] == "DROP_LOCK":
            drop_at = e["t_ns"]
        elif e["event"] == "LOCK_RELEASED" and drop_at is not None:
            drop_to_release.append((e["t_ns"] - drop_at) / 1e6)
        elif e["event"] == "LOCK_OK" and drop_at is not None:
            drop_to_grant.append((e["t_ns"] - drop_at) / 1e6)
            drop_at = None
    if not drop_to_grant:
        raise SystemExit(f"no hand-over with {clients} clients")
    rel, grant = np.asarray(drop_to_release), np.asarray(drop_to_grant)
    return {
        "clients": clients,
        "kernel_us": kernel_us,
        "handovers": len(grant),
        "release_p50_ms": float(np.percentile(rel, 50)),
        "release_p99_ms": float(np.percentile(rel, 99)),
        "handover_p50_ms": float(np.percentile(grant, 50)),
        "handover_p99_ms": float(np.percentile(grant, 99)),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2_000_000)
    parser.add_argument("--clients", default="2,8")
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args()
    fake_dir = library_path("fakecuda").parent
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in (str(fake_dir), env.get("LD_LIBRARY_PATH", "")) if p
    )
    env.pop("FAKECUDA_LOG", None)
    with tempfile.TemporaryDirectory() as tmp:
        ovh = overhead(args.calls, Path(tmp), env)
        print(json.dumps({"overhead": ovh}))
        for kernel_us in (10, 0):
            for n in (int(c) for c in args.clients.split(",")):
                row = handover(n, kernel_us, args.seconds, Path(tmp), env)
                print(json.dumps({"handover": row}))


if __name__ == "__main__":
    main()
