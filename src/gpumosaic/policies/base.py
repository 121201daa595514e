"""The one policy contract: ``allocate(PolicyInput) -> Allocation``.

An allocation is Gavel's matrix X (jobs x GPU types): X[j, t] is the fraction of time
job j should run on GPU type t. GPU demand counts fractional jobs as
num_gpu * gpu_milli / 1000, so a 300-milli job uses 0.3 of a GPU's capacity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class PackedPairs:
    """Candidate job pairs for space sharing and their measured pair throughputs.

    ``pairs[k] = (a, b)`` are row indices into the PolicyInput's jobs;
    ``throughputs[k, t] = (rate of a, rate of b)`` when packed on GPU type t.
    """

    pairs: npt.NDArray[np.int64]  # (n_pairs, 2)
    throughputs: FloatArray  # (n_pairs, n_types, 2)


@dataclass(frozen=True, slots=True)
class PolicyInput:
    """Everything a policy may look at, as arrays aligned on job rows / type columns."""

    job_ids: tuple[int, ...]
    job_types: tuple[str, ...]
    gpu_types: tuple[str, ...]
    throughputs: FloatArray  # (n_jobs, n_types) isolated steps/s; 0 = cannot run there
    scale_factors: IntArray  # (n_jobs,) GPUs per job
    demand: FloatArray  # (n_jobs,) GPUs: num_gpu * gpu_milli / 1000
    capacity: FloatArray  # (n_types,) GPUs of each type
    priority_weights: FloatArray  # (n_jobs,)
    remaining_steps: FloatArray  # (n_jobs,)
    total_steps: FloatArray  # (n_jobs,)
    arrival_s: FloatArray  # (n_jobs,)
    attained_service_s: FloatArray  # (n_jobs,) GPU-seconds received so far
    now_s: float = 0.0
    entities: tuple[str, ...] = ()
    entity_weights: tuple[tuple[str, float], ...] = ()
    slo_s: FloatArray | None = None  # (n_jobs,) deadline from arrival, NaN for none
    cost_per_hour: FloatArray | None = None  # (n_types,) dollars per GPU-hour
    packed: PackedPairs | None = None

    @property
    def num_jobs(self) -> int:
        return len(self.job_ids)


@dataclass(frozen=True, slots=True)
class Allocation:
    """X[j, t] in [0, 1], row sums <= 1, per-type demand-weighted sums <= capacity.

    With space sharing, ``pair_matrix[k, t]`` is the time fraction of pair k packed on
    type t (a job's total time over singles and its pairs is <= 1).
    """

    job_ids: tuple[int, ...]
    gpu_types: tuple[str, ...]
    matrix: FloatArray
    pair_matrix: FloatArray | None = None
    packed: PackedPairs | None = None
    objective: float = float("nan")
    notes: tuple[str, ...] = field(default=())

    @property
    def fallbacks(self) -> int:
        """How many solver failures this allocation worked around (``fallback_note``s)."""
        return sum(1 for note in self.notes if note.startswith(FALLBACK_PREFIX))


# A note that starts with this marks one fallback (a failed LP/MILP/conic solve that the
# policy worked around); ``Allocation.fallbacks`` counts them for the run's summary.
FALLBACK_PREFIX = "fallback: "


def fallback_note(message: str) -> str:
    """The note recording one fallback, e.g. ``fallback_note("round 2: MILP failed ...")``."""
    return FALLBACK_PREFIX + message


class Policy(Protocol):
    """``name`` is read-only so that frozen dataclasses satisfy the protocol."""

    @property
    def name(self) -> str: ...

    def allocate(self, inp: PolicyInput) -> Allocation: ...
