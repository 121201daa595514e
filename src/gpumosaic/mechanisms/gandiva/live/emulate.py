"""An emulated training job for Gandiva live: ``runtime/emulate.py``'s job (Gavel's table
rate for its type, on its GPU model, under the service's time scale), whose rate follows
the job it shares its GPU with.

Gandiva packs and unpacks a pair while both run, so a job's partner changes within one
lease: the driver writes the partner's job type (empty: alone) into the file named by
``GPUMOSAIC_GANDIVA_PARTNER_FILE`` whenever the processes on the job's GPU change, and
this loop reads it again when the file changes. Packed, the job steps at its rate in
Gavel's measured pair (the column's ``(partner type, 1)`` entry, the same entry the
simulator's ``RateModel.pair`` reads); a pair the table does not measure runs at the rate
alone (Gandiva never packs such a pair, so it does not happen under the decider).

Run as ``python -m gpumosaic.mechanisms.gandiva.live.emulate --job-type TYPE``.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import time
from importlib import resources

from gpumosaic.lease import Lease, LeaseError
from gpumosaic.runtime.emulate import (
    ENV_TABLE_COLUMN,
    MAX_ITERATIONS_PER_S,
    MIN_SLEEP_S,
    EmulationError,
    rate_of,
)

ENV_PARTNER_FILE = "GPUMOSAIC_GANDIVA_PARTNER_FILE"
CHECK_EVERY_S = 0.05  # wall seconds between looks at the partner file
REPORT_EVERY_S = 0.2  # wall seconds between progress reports (the lease default is 1)


def pair_rates(job_type: str, column: str, factor: float) -> dict[str, float]:
    """Partner job type -> this job's rate beside it (one GPU each), from the table's
    JSON (standard library only: a job's start-up is launch latency)."""
    ref = resources.files("gpumosaic") / "data" / "gavel" / "simulation_throughputs.json"
    entries = json.loads(ref.read_text()).get(column, {})
    for key_text, entry in entries.items():
        if ast.literal_eval(key_text) != (job_type, 1):
            continue
        out = {}
        for other_text, rates in entry.items():
            if other_text == "null":
                continue
            other, scale = ast.literal_eval(other_text)
            if scale == 1:
                out[str(other)] = factor * float(rates[0])
        return out
    return {}


class PartnerWatch:
    """The partner file, read again every ``CHECK_EVERY_S`` (by content: two writes in
    one tick of the file system's clock keep one modification time)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._checked = -CHECK_EVERY_S
        self.partner = ""

    def changed(self) -> bool:
        now = time.monotonic()
        if not self.path or now - self._checked < CHECK_EVERY_S:
            return False
        self._checked = now
        try:
            with open(self.path) as f:
                partner = f.read().strip()
        except OSError:
            return False
        if partner == self.partner:
            return False
        self.partner = partner
        return True


def run(job_type: str, environ: dict[str, str] | None = None) -> int:
    """Emulate one lease of the job; exit code."""
    env = dict(os.environ if environ is None else environ)
    lease = Lease.from_env(env)
    # Gandiva judges a pair by the rates of the reports within a trial, a few wall seconds
    # under a time scale of hundreds: report five times as often as the default.
    lease.report_every_s = REPORT_EVERY_S
    alone = rate_of(job_type, env, max(lease.world_size, 1))
    column, sep, factor = env.get(ENV_TABLE_COLUMN, "").partition(":")
    pairs = pair_rates(job_type, column, float(factor)) if column and sep else {}
    watch = PartnerWatch(env.get(ENV_PARTNER_FILE, ""))
    rate = alone.steps_per_s
    state = lease.load() or {"step": 0}
    # A segment of constant rate: its first step and the stepping clock at its start.
    seg_step: int | None = None
    seg_clock = 0.0
    stride = max(1, int(rate * lease.time_scale / MAX_ITERATIONS_PER_S))
    for step in lease.steps(start=int(state["step"]), save=lambda: state, stride=stride):
        if watch.changed() or seg_step is None:
            rate = pairs.get(watch.partner, alone.steps_per_s)  # "": alone
            seg_step, seg_clock = step, lease.stepping_s()
        done = step + lease.chunk
        lag = seg_clock + (done - seg_step) / (rate * lease.time_scale) - lease.stepping_s()
        if lag > MIN_SLEEP_S:
            time.sleep(lag)
        state["step"] = done
    lease.save(state)
    print(
        f"emulated {alone.job_type} on {alone.gpu_model}: {alone.steps_per_s:.4g} steps/s "
        f"alone, last partner {watch.partner or 'none'}, lease over at step {state['step']}",
        flush=True,
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpumosaic.mechanisms.gandiva.live.emulate")
    parser.add_argument("--job-type", required=True)
    args = parser.parse_args(argv)
    try:
        return run(args.job_type)
    except (LeaseError, EmulationError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
