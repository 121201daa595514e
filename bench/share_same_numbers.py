"""Hashes of the nvshare model's outcomes, to compare two commits ("same numbers").

    PYTHONPATH=src python bench/share_same_numbers.py > after.json
    PYTHONPATH=/tmp/before/src python bench/share_same_numbers.py > before.json
    diff before.json after.json

``repro/<tq list>``: every cell of ``gpumosaic reproduce nvshare`` (the published TQs and
the short-quantum sweep), each float written with ``repr`` so that a change in the last
bit shows. ``random/<seed>``: 300 seeded random GPUs (1-5 jobs, any working sets, TQ
0.1-500 s, anti-thrashing on or off, arrivals, cycles), a hash of every job's finish,
lock wait, refill, thrashing and hand-overs. Anti-thrashing ``auto`` is new with the
shared lock and is not in the before/after set.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time

import numpy as np

from gpumosaic.experiments.reproductions.nvshare import reproduce_nvshare
from gpumosaic.sharing import NvshareModel, SharedJob

GPU_MIB = 16384.0


def repro_cells(tqs: tuple[float, ...]) -> dict[str, str]:
    out = {}
    for row in reproduce_nvshare(tqs):
        key = f"{row.job}/{row.setup}/{row.tq_s}"
        out[key] = repr((row.total_s, row.handovers, row.thrash_s, row.lock_wait_s, row.refill_s))
    return out


def random_hash(seed: int, count: int = 300) -> str:
    rng = np.random.default_rng(seed)
    h = hashlib.sha256()
    for _ in range(count):
        n = int(rng.integers(1, 6))
        jobs = [
            SharedJob(
                f"j{i}",
                float(rng.uniform(1.0, 300.0)),
                float(rng.choice([0.1, 0.5, 0.9, 1.0])),
                float(rng.uniform(0.0, 20_000.0)),
                [None, 5.0, 40.0][int(rng.integers(0, 3))],
                float(rng.uniform(0.0, 100.0)),
            )
            for i in range(n)
        ]
        model = NvshareModel(
            tq_s=float(rng.uniform(0.1, 500.0)), anti_thrashing=bool(rng.random() < 0.7)
        )
        out = model.simulate(jobs, GPU_MIB)
        for j in out.jobs:
            h.update(
                repr((j.finish_s, j.lock_wait_s, j.refill_s, j.thrash_s, j.handovers_in)).encode()
            )
        h.update(repr(out.handovers).encode())
    return h.hexdigest()[:16]


def main() -> None:
    t0 = time.perf_counter()
    result: dict[str, object] = {
        "repro/1000,60,30": repro_cells((1000.0, 60.0, 30.0)),
        "repro/sweep": repro_cells((1000.0, 300.0, 120.0, 60.0, 30.0, 20.0, 10.0, 5.0)),
    }
    for seed in (0, 1):
        result[f"random/{seed}"] = random_hash(seed)
    json.dump(result, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    print(f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
