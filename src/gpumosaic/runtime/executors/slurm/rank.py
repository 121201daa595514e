"""What a lease's Slurm batch job runs: ``python -m gpumosaic.runtime.executors.slurm.rank
SPEC``. It starts the rank's command as the Ray executor's actor does (``LeaseProcess``:
a clean environment, its own session, its GPUs, killed if this process dies), forwards a
stop (SIGTERM from ``scancel --signal TERM --batch``) with the grace period the service
wrote beside the spec, waits for the command's whole process group, and writes its exit
code beside the spec (``SPEC.exit``): Slurm's own record of a job's exit may be purged or
absent (no accounting), this file is not."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from gpumosaic.runtime.executors.ray import LeaseProcess

DEFAULT_GRACE_S = 10.0


def grace_path(spec: Path) -> Path:
    return spec.with_name(spec.name + ".grace")


def exit_path(spec: Path) -> Path:
    return spec.with_name(spec.name + ".exit")


def _grace(spec: Path, default: float) -> float:
    try:
        return float(grace_path(spec).read_text())
    except (OSError, ValueError):
        return default


def main(argv: list[str]) -> int:
    spec_path = Path(argv[1])
    spec = json.loads(spec_path.read_text())
    proc = LeaseProcess(spec["command"], spec["workdir"], spec["env"], spec["log_path"])
    default = float(spec.get("grace_s", DEFAULT_GRACE_S))

    def on_stop(signum: int, frame: object) -> None:
        proc.terminate(_grace(spec_path, default))

    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)
    code, _ = proc.wait()
    tmp = exit_path(spec_path).with_suffix(".tmp")
    tmp.write_text(json.dumps({"code": code, "failure": proc.failure()}))
    os.replace(tmp, exit_path(spec_path))
    return code if 0 <= code < 256 else 128 + (-code % 128)


if __name__ == "__main__":  # pragma: no cover - runs as the batch job
    sys.exit(main(sys.argv))
