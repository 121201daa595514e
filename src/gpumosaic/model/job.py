"""JobSpec: everything the scheduler knows about a job before it runs."""

from __future__ import annotations

from dataclasses import dataclass, fields

from gpumosaic.model.gpu import MILLI_PER_GPU


@dataclass(frozen=True, slots=True)
class JobSpec:
    """A job (or Kubernetes pod) as submitted.

    Units: seconds, milli-GPU per GPU (1000 = one whole GPU), milli-CPU, MiB.
    ``work`` is in steps; a trace that gives durations instead uses steps = seconds on a
    reference GPU and a throughput of 1 step/s there (``ConstantThroughputs``).
    ``allowed_models`` is ``None`` for "any GPU model", else upper-case model names.
    ``may_span_nodes``: a multi-GPU job may run on GPUs of several servers at once (a
    distributed training job, as Gavel's are); a Kubernetes pod (openb tasks) may not.
    Every mechanism and placement honours it: a job that may not span needs one server.
    """

    id: int
    arrival_s: float
    job_type: str
    num_gpu: int
    gpu_milli: int
    work: float
    cpu_milli: int = 0
    memory_mib: int = 0
    gpu_memory_mib: int | None = None
    gpu_time_fraction: float = 1.0
    allowed_models: frozenset[str] | None = None
    priority_weight: float = 1.0
    entity: str = ""
    slo_s: float | None = None
    name: str = ""
    may_span_nodes: bool = False

    def __post_init__(self) -> None:
        if self.num_gpu < 0:
            raise ValueError(f"job {self.id}: num_gpu must be >= 0, got {self.num_gpu}")
        if self.num_gpu > 0 and not 1 <= self.gpu_milli <= MILLI_PER_GPU:
            raise ValueError(f"job {self.id}: gpu_milli must be in 1..1000, got {self.gpu_milli}")
        if self.num_gpu > 1 and self.gpu_milli != MILLI_PER_GPU:
            raise ValueError(f"job {self.id}: a multi-GPU job must ask for whole GPUs")
        if self.cpu_milli < 0 or self.memory_mib < 0:
            raise ValueError(f"job {self.id}: cpu_milli and memory_mib must be >= 0")
        if self.work < 0:
            raise ValueError(f"job {self.id}: work must be >= 0")

    @property
    def scale_factor(self) -> int:
        """Gavel's name for the number of GPUs."""
        return self.num_gpu

    @property
    def total_gpu_milli(self) -> int:
        return self.num_gpu * self.gpu_milli if self.num_gpu else 0

    @property
    def gpu_demand(self) -> float:
        """GPU demand in GPUs as the policies count it: num_gpu * gpu_milli / 1000."""
        return self.total_gpu_milli / MILLI_PER_GPU

    @property
    def is_fractional(self) -> bool:
        return self.num_gpu == 1 and self.gpu_milli < MILLI_PER_GPU

    def allows(self, model_name: str) -> bool:
        return self.allowed_models is None or model_name.upper() in self.allowed_models

    def placed_as(self, job_id: int, allowed_models: frozenset[str] | None) -> JobSpec:
        """This spec under another id and allowed GPU models: ``dataclasses.replace``
        without re-validating what is already valid (a round mechanism builds one per job
        and GPU type, hundreds of thousands in a large run)."""
        spec = object.__new__(JobSpec)
        for name in _FIELD_NAMES:
            object.__setattr__(spec, name, getattr(self, name))
        object.__setattr__(spec, "id", job_id)
        object.__setattr__(spec, "allowed_models", allowed_models)
        return spec


_FIELD_NAMES = tuple(f.name for f in fields(JobSpec))
