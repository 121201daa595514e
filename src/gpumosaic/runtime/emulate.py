"""An emulated training job: the stand-in for a real job on machines without GPUs.

It uses ``gpumosaic.lease`` exactly as a training loop does (load the checkpoint, iterate
``lease.steps`` with a save callback, save at the end) and steps at the rate Gavel's
throughput table gives for its job type, on the GPU model it was placed on
(``GPUMOSAIC_GPU_MODEL``) with its number of GPUs (``GPUMOSAIC_WORLD_SIZE``, the scale
factor), times the service's time scale (``GPUMOSAIC_TIME_SCALE``). A "step" is a sleep
until its due time on the lease's own stepping clock (``Lease.stepping_s``: the clock its
reports count, without the time parked waiting for a round decision), so a late wake-up
is made up by the next steps and the rate the service measures is the table's.

Under ``serve --sharing nvshare:...`` (the service set ``GPUMOSAIC_SHARE_SOCKET`` and
preloaded the interposer) a step is GPU work instead (``run_shared``): its kernels go
through the interposer to the stand-in libcuda, so the share daemon's quanta really
serialize the sharers and a shared job steps slower for real.

A job without a Gavel type (an openb task, a job list in ``duration_s``, ...) is given
its rates instead: ``--rates MODEL=R,...`` (steps/s in job time of the whole job on each
GPU model, what the simulator's workload rates it at: ``sim-vs-live`` passes exactly
the simulator's ``workload.throughputs.rate(job, model)``). Given with ``--job-type``,
``--rates`` sets the isolated rate and the type stays the job's label.

Run as ``gpumosaic emulate --job-type TYPE`` or, with fewer imports at start-up,
``python -m gpumosaic.runtime.emulate --job-type TYPE`` / ``--rates MODEL=R,...`` (what
``sim-vs-live`` submits).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass

from gpumosaic.lease import ENV_PACKED_WITH, Lease, LeaseError

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
    packed_with: str = ""  # the partner's job type ("" alone)


def table_rate(
    job_type: str, gpu_model_name: str, scale_factor: int, packed_with: str = ""
) -> EmulatedRate:
    """Gavel's isolated rate of ``job_type`` on ``gpu_model_name`` (models Gavel never
    measured borrow a measured column, as the simulator's ``gavel`` workloads do), or its
    side of the packed rate with a ``packed_with`` job."""
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
    if not packed_with:
        return EmulatedRate(job_type, gpu.name, scale_factor, float(rate))
    column, factor = table.column(gpu)
    assert column is not None  # ``table.rate`` found a column
    pair = table.packed(job_type, 1, packed_with, 1, column)
    if pair is None:
        reverse = table.packed(packed_with, 1, job_type, 1, column)
        pair = None if reverse is None else (reverse[1], reverse[0])
    if pair is None or pair[0] <= 0 or not table.has(job_type, 1, column):
        raise _no_pair(job_type, packed_with, gpu.name)
    packed = pair_rate(float(rate), factor * table.isolated(job_type, 1, column), factor * pair[0])
    return EmulatedRate(job_type, gpu.name, scale_factor, packed, packed_with)


def pair_rate(isolated: float, isolated_1: float, packed_1: float) -> float:
    """A packed job's rate on its scale factor's GPUs: Gavel measured pairs on one GPU
    only, so a data-parallel job of ``sf`` GPUs is slowed by the one-GPU ratio on each
    of its GPUs (``policies/packing_pairs``, what the policy plans with)."""
    if isolated == isolated_1:  # one GPU: the measured rate itself, to the last digit
        return packed_1
    return isolated * packed_1 / isolated_1


def _row_pair(row: dict[str, object] | None, partner: tuple[str, int], side: int) -> float | None:
    """``side`` of the pair entry for ``partner`` in one row of the table's JSON."""
    import ast

    for text, value in (row or {}).items():
        if text != "null" and isinstance(value, list) and ast.literal_eval(text) == partner:
            return float(value[side])
    return None


def _no_pair(job_type: str, partner: str, gpu_name: str) -> EmulationError:
    return EmulationError(
        f"Gavel's table has no packed rate for job type {job_type!r} with {partner!r} on {gpu_name}"
    )


def column_rate(
    job_type: str,
    column: str,
    factor: float,
    scale_factor: int,
    gpu_name: str,
    packed_with: str = "",
) -> EmulatedRate:
    """The rate from the table's JSON, read with the standard library only (a job's
    start-up is launch latency: no numpy, no full table parse); with ``packed_with``,
    the job's side of the pair's packed rate (``pair_rate``)."""
    import ast
    import json
    from importlib import resources

    ref = resources.files("gpumosaic") / "data" / "gavel" / "simulation_throughputs.json"
    entries: dict[str, dict[str, object]] = json.loads(ref.read_text()).get(column, {})
    by_key = {ast.literal_eval(text): entry for text, entry in entries.items()}
    entry = by_key.get((job_type, scale_factor))
    if entry is None:
        raise EmulationError(
            f"Gavel's table has no rate for job type {job_type!r} on {scale_factor} "
            f"{gpu_name} GPU(s)"
        )
    isolated = factor * float(entry["null"])  # type: ignore[arg-type]
    if not packed_with:
        return EmulatedRate(job_type, gpu_name, scale_factor, isolated)
    # Gavel's table measures pairs on one GPU, under either member's row.
    packed = _row_pair(by_key.get((job_type, 1)), (packed_with, 1), 0)
    if packed is None:
        packed = _row_pair(by_key.get((packed_with, 1)), (job_type, 1), 1)
    alone = by_key.get((job_type, 1))
    if alone is None or packed is None or packed <= 0:
        raise _no_pair(job_type, packed_with, gpu_name)
    rate = pair_rate(isolated, factor * float(alone["null"]), factor * packed)  # type: ignore[arg-type]
    return EmulatedRate(job_type, gpu_name, scale_factor, rate, packed_with)


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
    partner = env.get(ENV_PACKED_WITH, "")
    column, sep, factor = env.get(ENV_TABLE_COLUMN, "").partition(":")
    if column and sep:
        return column_rate(job_type, column, float(factor), scale_factor, gpu_name, partner)
    return table_rate(job_type, gpu_name, scale_factor, partner)


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
    if env.get(ENV_SHARE_SOCKET):  # under the share runtime: steps are GPU work
        return run_shared(lease, rate, state, wall_rate, env)
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
    packed = f" packed with {rate.packed_with}" if rate.packed_with else ""
    print(
        f"emulated {rate.job_type} on {rate.gpu_model} x{rate.scale_factor}{packed}: "
        f"{rate.steps_per_s:.4g} steps/s, lease over at step {state['step']}",
        flush=True,
    )
    return 0


# ---- a step under the share runtime (serve --sharing nvshare:...) ---------------------

ENV_SHARE_SOCKET = "GPUMOSAIC_SHARE_SOCKET"  # the GPU's daemon socket (set by the service)
ENV_SHARE_LIBCUDA = "GPUMOSAIC_SHARE_LIBCUDA"  # the driver the interposer forwards to
ENV_FAKE_KERNEL_US = "FAKECUDA_KERNEL_US"  # the stand-in's kernel length (read per launch)
ENV_FAKE_DEVICE_FILE = "FAKECUDA_DEVICE_FILE"  # the stand-in's device clock, per GPU
SHARED_STRIDE_S = 0.025  # wall seconds of work per iteration (a few ctypes calls each)
SHARED_KERNEL_S = 0.02  # longest kernel: a drop waits at most this for the holder
# A kernel call that returns this much later than its kernel's length is the emulator's
# own overhead (ctypes, the sleep's wake-up on a loaded machine), which is paced as host
# time; a longer delay is waiting for the lock or the device, which is not made up.
# Not measured: a hand-over or another job's kernel takes milliseconds to tens of them.
SHARED_OVERHEAD_CAP_S = 0.002


def run_shared(
    lease: Lease, rate: EmulatedRate, state: dict[str, int], wall_rate: float, env: dict[str, str]
) -> int:
    """The lease's steps as GPU work under the share runtime.

    A step of ``1 / wall_rate`` wall seconds is a GPU phase as the nvshare model has it
    (``sharing/gpu_phase.py``): kernels for ``GPU_PHASE_BUSY`` of it, host time for the
    rest. The kernels are ``cuLaunchKernel`` + ``cuCtxSynchronize`` on the stand-in
    libcuda through the interposer (ctypes' ``dlsym`` reaches its hooks), so a job that
    does not hold its GPU's lock waits in the launch, as a real one does; and the
    stand-in's device clock is shared by the jobs on one GPU (``FAKECUDA_DEVICE_FILE``
    next to its socket), so jobs that run at once (anti-thrashing off, or auto with room)
    queue for the device. Nothing is made up after a wait: time blocked on the GPU is
    time the job did not step. Host time is paced on the stepping clock less the time in
    GPU calls, so the loop's own overhead counts as host time (and so does a kernel
    call's return after its kernel's end by under ``SHARED_OVERHEAD_CAP_S``)."""
    import ctypes

    from gpumosaic.sharing.gpu_phase import GPU_PHASE_BUSY

    driver = env.get(ENV_SHARE_LIBCUDA)
    if not driver:
        from gpumosaic.runtime.share.native import ShareError, library_path

        try:
            driver = str(library_path("fakecuda"))
        except ShareError as err:  # no C compiler on this node, say
            raise EmulationError(f"no stand-in libcuda to step under the runtime: {err}") from None
    # The interposer reads these at its first hooked call, and the stand-in at each
    # launch: both after this point (os.environ writes go to the C environment).
    os.environ[ENV_SHARE_LIBCUDA] = driver
    os.environ[ENV_FAKE_DEVICE_FILE] = env[ENV_SHARE_SOCKET] + ".device"
    try:
        cuda = ctypes.CDLL(driver)
    except OSError as err:
        raise EmulationError(f"cannot load the stand-in libcuda {driver}: {err}") from None
    if cuda.cuInit(0) != 0:
        raise EmulationError(f"the stand-in driver {driver} did not initialise")
    launch = cuda.cuLaunchKernel
    launch.argtypes = [ctypes.c_void_p, *([ctypes.c_uint] * 7), ctypes.c_void_p]
    launch.argtypes += [ctypes.c_void_p] * 2
    sync = cuda.cuCtxSynchronize
    kernel_us = ""
    gpu_s = 0.0  # wall time inside GPU calls (kernels and waiting for the lock)
    overhead_s = 0.0  # of which the emulator's own, paced as host time
    first: int | None = None
    stride = max(1, int(wall_rate * SHARED_STRIDE_S))
    for step in lease.steps(start=int(state["step"]), save=lambda: state, stride=stride):
        if first is None:
            first = step
        busy_s = GPU_PHASE_BUSY * lease.chunk / wall_rate
        kernels = max(1, math.ceil(busy_s / SHARED_KERNEL_S))
        length = f"{1e6 * busy_s / kernels:.3f}"
        if length != kernel_us:
            os.environ[ENV_FAKE_KERNEL_US] = kernel_us = length
        kernel_s = busy_s / kernels
        for _ in range(kernels):
            t0 = time.monotonic()
            if launch(None, 1, 1, 1, 1, 1, 1, 0, None, None, None) != 0 or sync() != 0:
                raise EmulationError("a kernel launch through the share runtime failed")
            took = time.monotonic() - t0
            gpu_s += took
            overhead_s += min(max(took - kernel_s, 0.0), SHARED_OVERHEAD_CAP_S)
        done = step + lease.chunk
        host_due = (1.0 - GPU_PHASE_BUSY) * (done - first) / wall_rate
        lag = host_due - (lease.stepping_s() - gpu_s + overhead_s)
        if lag > MIN_SLEEP_S:
            time.sleep(lag)
        state["step"] = done
    lease.save(state)
    print(
        f"emulated {rate.job_type} on {rate.gpu_model} x{rate.scale_factor} under the share "
        f"runtime: {rate.steps_per_s:.4g} steps/s alone, lease over at step {state['step']}, "
        f"{gpu_s:.2f} s in GPU calls",
        flush=True,
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpumosaic.runtime.emulate")
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
