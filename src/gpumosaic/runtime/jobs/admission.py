"""Admission: the one place where the round service's limits are defined and enforced.

Every number a client can send is finite and inside a documented range, every string and
list is bounded, and every body is size-bounded before it is read (docs/live.md,
"Admission"). The pydantic models (``submission.JobSubmission`` and the lease bodies
here) carry these limits, so HTTP (FastAPI validates with them), the CLI (``check_job``
runs the same model before anything is sent) and the batch route apply the same rules.

The weight range is the one the policies solve reliably: a weight of 1e-300 made
Clarabel stop with NumericalError (issue 23); [1e-3, 1e3] was checked against every
registered policy with steps from 1 to 1e12 (a failed solve would still be a counted
fallback, ``mechanisms/rounds/allocation.py``).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationError

MAX_STEPS = 1e12  # total steps of a job; also any step count a lease reports
# A submission's known rates (steps/s in job time): 12 orders of magnitude, with
# Gavel's table (0.1-100 steps/s) in the middle; a bound, not a calibration (six
# policies, the perf ones among them, solved jobs at both ends without a fallback).
MIN_STEPS_PER_S = 1e-6
MAX_STEPS_PER_S = 1e6
MIN_PRIORITY_WEIGHT = 1e-3
MAX_PRIORITY_WEIGHT = 1e3
MAX_GPUS = 1024  # GPUs of one job (and ranks of one lease)
MAX_RETRIES = 100
MAX_ID = 2**63 - 1  # SQLite's INTEGER: a larger id is a 422, never an overflow
MAX_PID = 2**31 - 1
MAX_ELAPSED_S = 1e9  # about 31 years
MAX_COMMAND_CHARS = 16_384
MAX_NAME_CHARS = 128  # name, job_type, a GPU model name
MAX_PATH_CHARS = 4_096  # workdir
MAX_GPU_MODELS = 16
MAX_ENV_VARS = 64
MAX_ENV_KEY_CHARS = 256
MAX_ENV_VALUE_CHARS = 16_384
MAX_LEASE_ID_CHARS = 128
MAX_BODY_BYTES = 256 * 1024  # one job, one lease call
MAX_BATCH_BODY_BYTES = 16 * 1024 * 1024  # POST /v1/jobs/batch
MAX_BATCH_JOBS = 10_000
DEFAULT_PAGE = 100  # GET /v1/jobs
MAX_PAGE = 1_000
DEFAULT_LOG_TAIL_BYTES = 20_000
MAX_LOG_TAIL_BYTES = 16 * 1024 * 1024
ENV_KEY_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"

STRICT = ConfigDict(extra="forbid", allow_inf_nan=False)


def no_nul(value: str, what: str) -> str:
    """A NUL byte cannot reach a process (argv, environment, path): refuse it here."""
    if "\0" in value:
        raise ValueError(f"{what} contains a NUL byte")
    return value


class LeaseInit(BaseModel):
    model_config = STRICT
    steps: float = Field(ge=0, le=MAX_STEPS)
    rank: int = Field(default=0, ge=0, lt=MAX_GPUS)
    pid: int = Field(default=0, ge=0, le=MAX_PID)


class LeaseProgress(BaseModel):
    model_config = STRICT
    steps: float = Field(ge=0, le=MAX_STEPS)
    elapsed_s: float = Field(default=0.0, ge=0, le=MAX_ELAPSED_S)
    at_end: bool = False
    rank: int = Field(default=0, ge=0, lt=MAX_GPUS)
    pid: int = Field(default=0, ge=0, le=MAX_PID)


class LeaseCheckpoint(BaseModel):
    model_config = STRICT
    steps: float = Field(ge=0, le=MAX_STEPS)
    rank: int = Field(default=0, ge=0, lt=MAX_GPUS)
    pid: int = Field(default=0, ge=0, le=MAX_PID)


def first_problem(err: ValidationError) -> tuple[str, str]:
    """(dotted field, message) of a validation error's first problem."""
    first = err.errors(include_input=False)[0]
    loc = ".".join(str(p) for p in first.get("loc", ()))
    message = str(first.get("msg", "invalid")).removeprefix("Value error, ")
    return loc, message
