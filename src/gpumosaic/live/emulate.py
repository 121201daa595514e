"""An emulated training job: the stand-in for a real job on machines without GPUs.

It uses ``gpumosaic.lease`` exactly as a training loop does (load the checkpoint, iterate
``lease.steps`` with a save callback, save at the end) and steps at the rate Gavel's
throughput table gives for its job type, on the GPU model it was placed on
(``GPUMOSAIC_GPU_MODEL``) with its number of GPUs (``GPUMOSAIC_WORLD_SIZE``, the scale
factor), times the service's time scale (``GPUMOSAIC_TIME_SCALE``). A "step" is a sleep
until its due time on the lease's own stepping clock (``Lease.stepping_s``: the clock its
reports count, without the time parked waiting for a round decision), so a late wake-up
is made up by the next steps and the rate the service measures is the table's.

A job without a Gavel type (an openb task, a job list in ``duration_s``, ...) is given
its rates instead: ``--rates MODEL=R,...`` (steps/s in job time of the whole job on each
GPU model, what the simulator's workload rates it at: ``sim-vs-live`` passes exactly
the simulator's ``workload.throughputs.rate(job, model)``). Given with ``--job-type``,
``--rates`` sets the isolated rate and the type stays the job's label.

Run as ``gpumosaic emulate --job-type TYPE`` or, with fewer imports at start-up,
``python -m gpumosaic.live.emulate --job-type TYPE`` / ``--rates MODEL=R,...`` (what
``sim-vs-live`` submits).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass

from gpumosaic.lease import Lease, LeaseError

ENV_GPU_MODEL = "GPUMOSAIC_GPU_MODEL"
ENV_TABLE_COLUMN = "GPUMOSAIC_GPU_TABLE_COLUMN"  # "v100:1.0", set by the service
MAX_ITERATIONS_PER_S = 500.0
MIN_SLEEP_S = 0.002


class EmulationError(ValueError):
    """The job type or GPU model has no rate to emulate."""


@dataclass(frozen=True, slots=True)
class EmulatedRate:
    job_type: str
    gpu_model: str
    scale_factor: int
    steps_per_s: float  # job time


def table_rate(job_type: str, gpu_model_name: str, scale_factor: int) -> EmulatedRate:
    """Gavel's isolated rate of ``job_type`` on ``gpu_model_name`` (models Gavel never
    measured borrow a measured column, as the simulator's ``gavel`` workloads do)."""
    from gpumosaic.model.gpu import UnknownGpuModelError, gpu_model
    from gpumosaic.model.job import JobSpec
    from gpumosaic.workloads.throughputs import BORROWED_RATES, GavelThroughputTable

    try:
        gpu = gpu_model(gpu_model_name)
    except UnknownGpuModelError as err:
        raise EmulationError(str(err)) from None
    table = GavelThroughputTable.load().borrowing(BORROWED_RATES)
    job = JobSpec(
        id=0, arrival_s=0.0, job_type=job_type, num_gpu=scale_factor, gpu_milli=1000, work=1.0
    )
    try:
        rate = table.rate(job, gpu)
    except KeyError:
        raise EmulationError(
            f"Gavel's table has no rate for job type {job_type!r} on {scale_factor} "
            f"{gpu.name} GPU(s)"
        ) from None
    return EmulatedRate(job_type, gpu.name, scale_factor, float(rate))


def column_rate(
    job_type: str, column: str, factor: float, scale_factor: int, gpu_name: str
) -> EmulatedRate:
    """The rate from the table's JSON, read with the standard library only (a job's
    start-up is launch latency: no numpy, no full table parse)."""
    import ast
    import json
    from importlib import resources

    ref = resources.files("gpumosaic") / "data" / "gavel" / "simulation_throughputs.json"
    entries = json.loads(ref.read_text()).get(column, {})
    for key_text, entry in entries.items():
        if ast.literal_eval(key_text) == (job_type, scale_factor):
            return EmulatedRate(job_type, gpu_name, scale_factor, factor * float(entry["null"]))
    raise EmulationError(
        f"Gavel's table has no rate for job type {job_type!r} on {scale_factor} {gpu_name} GPU(s)"
    )


def parse_rates(text: str) -> dict[str, float]:
    """``MODEL=R,...`` -> {MODEL (upper case): R}: each R a finite number > 0, each model
    once. A bad part is an EmulationError naming it."""
    import math

    rates: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        model, sep, value = part.partition("=")
        model = model.strip().upper()
        try:
            rate = float(value) if sep else math.nan
        except ValueError:
            rate = math.nan
        if not model or not (0 < rate < math.inf):
            raise EmulationError(
                f"--rates part {part!r} is not MODEL=R with R a finite number > 0 (steps/s)"
            )
        if model in rates:
            raise EmulationError(f"--rates names {model} twice")
        rates[model] = rate
    if not rates:
        raise EmulationError("--rates is empty: give MODEL=R,... (steps/s on each model)")
    return rates


def given_rate(
    rates: dict[str, float], job_type: str, env: dict[str, str], scale_factor: int
) -> EmulatedRate:
    """The rate ``--rates`` gives for the GPU model the job was placed on."""
    gpu_name = env.get(ENV_GPU_MODEL, "")
    rate = rates.get(gpu_name.upper())
    if rate is None:
        raise EmulationError(
            f"--rates has no rate for GPU model {gpu_name or '(none: GPUMOSAIC_GPU_MODEL unset)'}"
            f" (it has {', '.join(sorted(rates))})"
        )
    return EmulatedRate(job_type or "job", gpu_name, scale_factor, rate)


def rate_of(
    job_type: str,
    env: dict[str, str],
    scale_factor: int,
    rates: dict[str, float] | None = None,
) -> EmulatedRate:
    if rates is not None:
        return given_rate(rates, job_type, env, scale_factor)
    gpu_name = env.get(ENV_GPU_MODEL, "")
    column, sep, factor = env.get(ENV_TABLE_COLUMN, "").partition(":")
    if column and sep:
        return column_rate(job_type, column, float(factor), scale_factor, gpu_name)
    return table_rate(job_type, gpu_name, scale_factor)


def run(
    job_type: str,
    steps: float | None = None,
    environ: dict[str, str] | None = None,
    rates: dict[str, float] | None = None,
) -> int:
    """Emulate one lease of the job (the process the service launched); exit code.
    ``rates`` (``--rates``): the job's steps/s per GPU model, instead of Gavel's table."""
    env = dict(os.environ if environ is None else environ)
    lease = Lease.from_env(env)
    if steps is not None:
        lease.total_steps = min(lease.total_steps, steps)
    rate = rate_of(job_type, env, max(lease.world_size, 1), rates)
    wall_rate = rate.steps_per_s * lease.time_scale
    state = lease.load() or {"step": 0}
    first: int | None = None
    # Under a time scale of hundreds a job steps tens of thousands of times a wall second:
    # the loop takes a stride of steps per iteration (at most ~MAX_ITERATIONS_PER_S) and
    # sleeps only when ahead by more than MIN_SLEEP_S, so the loop keeps up with the rate.
    stride = max(1, int(wall_rate / MAX_ITERATIONS_PER_S))
    for step in lease.steps(start=int(state["step"]), save=lambda: state, stride=stride):
        if first is None:
            first = step
        done = step + lease.chunk
        # These steps end when the lease's stepping clock (its reports' clock: parked
        # time excluded, saves and reports included) reaches their due time.
        lag = (done - first) / wall_rate - lease.stepping_s()
        if lag > MIN_SLEEP_S:
            time.sleep(lag)
        state["step"] = done
    lease.save(state)
    print(
        f"emulated {rate.job_type} on {rate.gpu_model} x{rate.scale_factor}: "
        f"{rate.steps_per_s:.4g} steps/s, lease over at step {state['step']}",
        flush=True,
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpumosaic.live.emulate")
    parser.add_argument("--job-type", default="")
    parser.add_argument("--steps", type=float, default=None)
    parser.add_argument(
        "--rates", default=None, help="MODEL=R,...: steps/s (job time) on each GPU model"
    )
    args = parser.parse_args(argv)
    if not args.job_type and args.rates is None:
        parser.error("give --job-type (Gavel's table rate) or --rates MODEL=R,...")
    try:
        rates = parse_rates(args.rates) if args.rates is not None else None
        return run(args.job_type, args.steps, rates=rates)
    except (LeaseError, EmulationError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
