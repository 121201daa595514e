"""What a user submits (validated, so a mistake is a 422 naming the field) and what the
service shows back. The limits are ``admission``'s (documented in docs/live.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from gpumosaic.errors import InputError
from gpumosaic.model.gpu import MILLI_PER_GPU, UnknownGpuModelError, gpu_model
from gpumosaic.runtime.jobs.admission import (
    ENV_KEY_PATTERN,
    MAX_BATCH_JOBS,
    MAX_COMMAND_CHARS,
    MAX_ENV_KEY_CHARS,
    MAX_ENV_VALUE_CHARS,
    MAX_ENV_VARS,
    MAX_GPU_MODELS,
    MAX_GPUS,
    MAX_NAME_CHARS,
    MAX_PATH_CHARS,
    MAX_PRIORITY_WEIGHT,
    MAX_RETRIES,
    MAX_STEPS,
    MAX_STEPS_PER_S,
    MIN_PRIORITY_WEIGHT,
    MIN_STEPS_PER_S,
    first_problem,
    no_nul,
)

# The states' spellings (an interface) and their typed ends are ``ends``'s.
from gpumosaic.runtime.jobs.ends import JOB_STATES as JOB_STATES
from gpumosaic.runtime.jobs.ends import TERMINAL_STATES as TERMINAL_STATES

EnvKey = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_ENV_KEY_CHARS, pattern=ENV_KEY_PATTERN)
]
EnvValue = Annotated[str, StringConstraints(max_length=MAX_ENV_VALUE_CHARS)]
ModelName = Annotated[str, StringConstraints(min_length=1, max_length=MAX_NAME_CHARS)]
StepsPerS = Annotated[float, Field(ge=MIN_STEPS_PER_S, le=MAX_STEPS_PER_S)]


class JobSubmission(BaseModel):
    """One job: a command line run as a subprocess, and what it needs."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, allow_inf_nan=False)

    command: str = Field(
        min_length=1, max_length=MAX_COMMAND_CHARS, description="shell command line of the job"
    )
    steps: float = Field(gt=0, le=MAX_STEPS, description="total training steps")
    gpus: int = Field(default=1, ge=1, le=MAX_GPUS, description="GPUs (a gang if > 1)")
    gpu_milli: int = Field(default=MILLI_PER_GPU, ge=1, le=MILLI_PER_GPU)
    gpu_models: list[ModelName] = Field(
        default_factory=list, max_length=MAX_GPU_MODELS, description="allowed models; [] = any"
    )
    priority_weight: float = Field(default=1.0, ge=MIN_PRIORITY_WEIGHT, le=MAX_PRIORITY_WEIGHT)
    name: str = Field(default="", max_length=MAX_NAME_CHARS)
    job_type: str = Field(
        default="",
        max_length=MAX_NAME_CHARS,
        description="a Gavel job type: its table rate is the prior",
    )
    rates: dict[ModelName, StepsPerS] = Field(
        default_factory=dict,
        max_length=MAX_GPU_MODELS,
        description="known steps/s (job time) of the whole job per GPU model: its prior "
        "there, as a Gavel type's table rate is (not profiled); {} = unknown",
    )
    workdir: str = Field(
        default="", max_length=MAX_PATH_CHARS, description="working directory ('' = the service's)"
    )
    env: dict[EnvKey, EnvValue] = Field(default_factory=dict, max_length=MAX_ENV_VARS)
    max_retries: int | None = Field(default=None, ge=0, le=MAX_RETRIES)
    preemptible: bool = Field(
        default=True,
        description="False: the job does not use the lease library; it runs as one lease "
        "from its start to its exit (never stopped at a round's end), done if it exits 0",
    )

    @field_validator("command", "name", "job_type", "workdir")
    @classmethod
    def _no_nul(cls, value: str) -> str:
        return no_nul(value, "the text")

    @field_validator("env")
    @classmethod
    def _env_no_nul(cls, value: dict[str, str]) -> dict[str, str]:
        for key, item in value.items():
            no_nul(item, f"the value of {key}")
        return value

    @field_validator("gpu_models")
    @classmethod
    def _known_models(cls, value: list[str]) -> list[str]:
        out = []
        for name in value:
            try:
                out.append(gpu_model(name).name)
            except UnknownGpuModelError as err:
                raise ValueError(str(err)) from None
        return out

    @field_validator("rates")
    @classmethod
    def _rated_models(cls, value: dict[str, float], info: ValidationInfo) -> dict[str, float]:
        allowed = info.data.get("gpu_models") or []  # validated before (declared before)
        out: dict[str, float] = {}
        for name, rate in value.items():
            try:
                model = gpu_model(name).name
            except UnknownGpuModelError as err:
                raise ValueError(str(err)) from None
            if model in out:
                raise ValueError(f"GPU model {model} is given twice")
            if allowed and model not in allowed:
                raise ValueError(f"{model} is not among gpu_models ({', '.join(allowed)})")
            out[model] = rate
        return out

    @field_validator("job_type")
    @classmethod
    def _known_job_type(cls, value: str) -> str:
        if value:  # a name the table lacks gave no prior, silently (issue 28)
            from gpumosaic.errors import InputError
            from gpumosaic.workloads.spec import check_job_type

            try:
                check_job_type(value)
            except InputError as err:
                raise ValueError(err.message) from None
        return value

    @model_validator(mode="after")
    def _whole_gpus_for_gangs(self) -> JobSubmission:
        if self.gpus > 1 and self.gpu_milli != MILLI_PER_GPU:
            raise ValueError("a multi-GPU job must ask for whole GPUs (gpu_milli 1000)")
        return self


class JobBatch(BaseModel):
    """Several jobs submitted together: all are admitted, or none (``submit --file``)."""

    model_config = ConfigDict(extra="forbid")

    jobs: list[JobSubmission] = Field(min_length=1, max_length=MAX_BATCH_JOBS)


class JobView(BaseModel):
    """A job as the API and ``gpumosaic jobs --json`` show it."""

    id: int
    name: str
    state: str
    command: str
    steps: float
    steps_done: float
    checkpoint_steps: float
    gpus: int
    gpu_milli: int
    gpu_models: list[str]
    priority_weight: float
    rates: dict[str, float] = Field(default_factory=dict)  # the submission's known rates
    gpu_type: str
    gpu_index: str
    attained_s: float
    steps_per_s: float | None
    attempts: int
    exit_code: int | None
    reason: str
    submitted_at: float
    started_at: float | None
    finished_at: float | None
    lease_id: str | None
    pid: int | None
    log_tail: str = ""
    shared: bool = False  # run under the share runtime (serve --sharing nvshare:...)
    handovers: int = 0  # times its GPU's share daemon handed it the GPU from another job
    lock_grants: int = 0  # times the daemon granted it the GPU (hand-overs included)
    # serve --mechanism gandiva only (null under rounds): times Gandiva suspended the
    # job, moved it to other GPUs, and the job it shares its GPU with now.
    suspensions: int | None = None
    migrations: int | None = None
    packed_with: int | None = None


def check_job(
    body: Mapping[str, Any],
    *,
    path: str | None = None,
    row: int | None = None,
    flags: bool = False,
) -> Any:
    """``body`` validated as a ``JobSubmission`` (the rules the service applies), or an
    ``InputError`` naming the file and row, and the field (as a CLI flag with ``flags``)."""
    try:
        return JobSubmission.model_validate(dict(body))
    except ValidationError as err:
        field, message = first_problem(err)
        name = field.split(".")[0]
        if flags and name:
            value = body.get(name)
            shown = value if isinstance(value, int | float) else None
            raise InputError(message, field="--" + name.replace("_", "-"), value=shown) from None
        raise InputError(message, path=path, row=row, field=field or None) from None
