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

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pytorch_train.py"


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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=float, default=3000)
    parser.add_argument("--model", default="A100")  # gpumosaic has no H100 profile yet
    parser.add_argument("--round-s", type=float, default=20.0)
    parser.add_argument("--timeout-s", type=float, default=240.0)
    parser.add_argument("--sharing", default=None, help="e.g. nvshare:tq=2,anti_thrashing=on")
    args = parser.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    from gpumosaic.live.rounds.client import ServiceClient
    from gpumosaic.live.rounds.service import Service, ServiceConfig, connect_ray

    command = f"{sys.executable} {EXAMPLE}"
    with tempfile.TemporaryDirectory() as tmp:
        config = ServiceConfig(
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

    print(
        json.dumps(
            {
                "gpu": gpu_name(),
                "sharing": args.sharing,
                "steps": args.steps,
                "alone": summary(alone_full) + summary(alone_half),
                "shared": summary(shared),
                "shared_makespan_s": round(time.time() - t0, 1),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
