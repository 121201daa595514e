"""Prints ``raylet=PID lease=LEASE rank=R``: the Ray node a lease's rank really runs
under, found by walking up its ancestors to the ``raylet`` (a job starts from a clean
environment, so Ray's own variables such as ``RAY_RAYLET_PID`` do not reach it). The lease
and rank are on the line because a gang's ranks write one log, interleaved."""

import os
from pathlib import Path


def raylet_pid() -> int | None:
    pid = os.getpid()
    while pid > 1:
        stat = Path(f"/proc/{pid}/stat").read_text()
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        if comm == "raylet":
            return pid
        pid = int(stat[stat.rindex(")") + 2 :].split()[1])
    return None


if __name__ == "__main__":
    lease = os.environ.get("GPUMOSAIC_LEASE_ID", "")
    rank = os.environ.get("GPUMOSAIC_RANK", "0")
    print(f"raylet={raylet_pid() or ''} lease={lease} rank={rank}", flush=True)
