"""Training throughput (steps/s) per job type, scale factor and GPU type.

Gavel's measured table (``data/gavel/simulation_throughputs.json``) keys jobs by
``"('<job type>', <scale factor>)"`` and GPU types by ``v100``/``p100``/``k80``; values are
the isolated throughput (``"null"``) and, for single-GPU jobs, the pair throughputs when
two jobs are packed on the same GPU.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Hashable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Protocol, runtime_checkable

from gpumosaic.errors import InputError
from gpumosaic.model.gpu import GpuModel
from gpumosaic.model.job import JobSpec

GAVEL_GPU_TYPES = ("v100", "p100", "k80")


class Throughputs(Protocol):
    """Steps per second of a job on one GPU model (all its GPUs of that model)."""

    def rate(self, job: JobSpec, gpu: GpuModel) -> float: ...


@runtime_checkable
class KeyedThroughputs(Throughputs, Protocol):
    """Throughputs whose rates depend on a job only through ``rate_key(job)``: jobs with
    equal keys have equal rates on every GPU model, so a caller looks rates up once per
    key (a round simulator admits hundreds of thousands of jobs of a few dozen keys)."""

    def rate_key(self, job: JobSpec) -> Hashable: ...


@dataclass(frozen=True, slots=True)
class ConstantThroughputs:
    """Every job runs ``steps_per_s`` on every GPU: for traces that give durations."""

    steps_per_s: float = 1.0

    def rate(self, job: JobSpec, gpu: GpuModel) -> float:
        return self.steps_per_s

    def rate_key(self, job: JobSpec) -> Hashable:
        return ()


JobKey = tuple[str, int]


# A placeholder, not a calibration: every unmeasured live job gets the same rate, so a
# live decider splits time evenly until the jobs report their own rates (a lease granted
# on an unmeasured rate is bounded by time only).
UNMEASURED_PRIOR_STEPS_PER_S = 1.0


class GavelThroughputTable:
    """Gavel's measured throughputs, isolated and packed."""

    def __init__(
        self,
        isolated: dict[str, dict[JobKey, float]],
        packed: dict[str, dict[tuple[JobKey, JobKey], tuple[float, float]]],
        source: str,
    ) -> None:
        self._isolated = isolated
        self._packed = packed
        self.source = source
        # Models the table lacks -> (measured column, factor): see ``borrowing``.
        self.borrowed: dict[str, tuple[str, float]] = {}
        self.gpu_types: tuple[str, ...] = tuple(isolated)
        first = next(iter(isolated.values()))
        self.job_types: tuple[str, ...] = tuple(dict.fromkeys(jt for jt, _ in first))

    @classmethod
    def load(cls, path: str | Path | None = None) -> GavelThroughputTable:
        """Load the packaged simulation table, or a JSON file of the same shape."""
        if path is None:
            ref = resources.files("gpumosaic") / "data" / "gavel" / "simulation_throughputs.json"
            text, source = ref.read_text(), "simulation_throughputs.json"
        else:
            try:
                text, source = Path(path).read_text(), str(path)
            except OSError as err:
                raise InputError(
                    f"cannot read throughput table: {err.strerror}", path=path
                ) from None
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as err:
            raise InputError(f"not JSON: {err.msg}", path=source, row=err.lineno) from None
        isolated: dict[str, dict[JobKey, float]] = {}
        packed: dict[str, dict[tuple[JobKey, JobKey], tuple[float, float]]] = {}
        # The table spells the same ~80 keys ~5,500 times: parse each text once.
        keys: dict[str, JobKey] = {}

        def parse(text: str) -> JobKey:
            key = keys.get(text)
            if key is None:
                key = keys[text] = _parse_job_key(text, source)
            return key

        for gpu_type in GAVEL_GPU_TYPES:
            if gpu_type not in raw:
                continue
            isolated[gpu_type] = {}
            packed[gpu_type] = {}
            for job_key_text, entries in raw[gpu_type].items():
                job_key = parse(job_key_text)
                isolated[gpu_type][job_key] = float(entries["null"])
                for other_text, pair in entries.items():
                    if other_text == "null":
                        continue
                    other = parse(other_text)
                    if pair[0] > 0 or pair[1] > 0:
                        packed[gpu_type][(job_key, other)] = (float(pair[0]), float(pair[1]))
        if not isolated:
            raise InputError("no GPU type v100/p100/k80 in the table", path=source)
        return cls(isolated, packed, source)

    def isolated(self, job_type: str, scale_factor: int, gpu_type: str) -> float:
        """Steps/s of the job alone; KeyError if the table lacks it."""
        return self._isolated[gpu_type][(job_type, scale_factor)]

    def has(self, job_type: str, scale_factor: int, gpu_type: str) -> bool:
        return (job_type, scale_factor) in self._isolated.get(gpu_type, {})

    def packed(
        self, job_type_a: str, sf_a: int, job_type_b: str, sf_b: int, gpu_type: str
    ) -> tuple[float, float] | None:
        """(throughput of a, throughput of b) when packed together; None if not measured."""
        return self._packed.get(gpu_type, {}).get(((job_type_a, sf_a), (job_type_b, sf_b)))

    def borrowing(self, borrowed: dict[str, tuple[str, float]]) -> GavelThroughputTable:
        """The same table, where a GPU model it does not measure (no ``throughput_key``)
        takes ``factor`` x the rates of a measured column (model name -> (column, factor);
        ``BORROWED_RATES`` is the documented default)."""
        table = GavelThroughputTable(self._isolated, self._packed, self.source)
        table.borrowed = dict(borrowed)
        return table

    def column(self, gpu: GpuModel) -> tuple[str | None, float]:
        """The column (and factor) that gives ``gpu``'s rates; (None, 1.0) if none does."""
        if gpu.throughput_key is not None:
            return gpu.throughput_key, 1.0
        return self.borrowed.get(gpu.name.upper(), (None, 1.0))

    def borrows(self, gpu: GpuModel) -> bool:
        """Whether ``gpu``'s rates are borrowed from another model's column."""
        return gpu.throughput_key is None and gpu.name.upper() in self.borrowed

    def rate_key(self, job: JobSpec) -> Hashable:
        """What ``rate`` reads of a job: its type and scale factor."""
        return job.job_type, max(job.num_gpu, 1)

    def rate(self, job: JobSpec, gpu: GpuModel) -> float:
        key, factor = self.column(gpu)
        if key is None:
            raise KeyError(f"Gavel's table does not measure GPU model {gpu.name}")
        return factor * self.isolated(job.job_type, max(job.num_gpu, 1), key)


# GPU models Gavel never measured -> (the measured column whose rates they borrow, factor).
# No profiles of these models exist to estimate from (workloads/estimation.py), so the
# mapping is a documented judgement (docs/gavel.md, "GPU models Gavel never measured"):
# T4 ~ P100 (8.1 vs 9.3 TFLOPS FP32, 16 GB); A10 and G2 (the A10 profile) ~ V100; G3 (the
# A100 profile) ~ 1.5 x V100 (FP32/TF32). The 1.5 is an estimate, not a measurement.
BORROWED_RATES: dict[str, tuple[str, float]] = {
    "V100M16": ("v100", 1.0),
    "V100M32": ("v100", 1.0),
    "T4": ("p100", 1.0),
    "A10": ("v100", 1.0),
    "G2": ("v100", 1.0),
    "G3": ("v100", 1.5),
}


def _parse_job_key(text: str, source: str) -> JobKey:
    try:
        value = ast.literal_eval(text)
        job_type, scale_factor = value
        return str(job_type), int(scale_factor)
    except (ValueError, SyntaxError, TypeError):
        raise InputError(f"bad job key {text!r}", path=source) from None
