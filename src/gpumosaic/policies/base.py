"""The one policy contract: ``allocate(PolicyInput) -> Allocation``.

An allocation is Gavel's matrix X (jobs x GPU types): X[j, t] is the fraction of time
job j should run on GPU type t. GPU demand counts fractional jobs as
num_gpu * gpu_milli / 1000, so a 300-milli job uses 0.3 of a GPU's capacity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

import numpy as np
import numpy.typing as npt

from gpumosaic.fallbacks import Fallbacks
from gpumosaic.types import FloatArray, IntArray

__all__ = ["FloatArray", "IntArray"]


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
    notes: tuple[str, ...] = field(default=())  # for people: what the solve did
    fallbacks: Fallbacks = field(
        default_factory=Fallbacks
    )  # counted: where it did something else than asked


class TypeOrder(Enum):
    """How Gavel's round mechanism visits GPU types when it hands out a round."""

    FIXED = "fixed"  # heterogeneity-aware and packing policies: X already picked the type
    SHUFFLED = "shuffled"  # heterogeneity-agnostic policies: a fresh random order per round


class PairCandidates(Enum):
    """Which job pairs the mechanism offers a space-sharing policy (``PolicyInput.packed``)."""

    NONE = "none"  # the policy does not pack
    BEST = "best"  # each job's best few partners by packed throughput (the LP policies)
    ALL = "all"  # every pair (Gandiva groups jobs at random and solves no LP)


@dataclass(frozen=True, slots=True)
class PolicyTraits:
    """What a policy is, as mechanisms need to know it (never read from its name)."""

    pairs: PairCandidates = PairCandidates.NONE
    type_order: TypeOrder = TypeOrder.SHUFFLED
    skips_zero_priority: bool = False  # FIFO runs only what it allocated (no work conserving)
    random: bool = False  # draws random choices: built with the run's numpy Generator

    @property
    def uses_pairs(self) -> bool:
        return self.pairs is not PairCandidates.NONE


def lp_traits(heterogeneity_aware: bool, use_pairs: bool) -> PolicyTraits:
    """Traits of Gavel's LP policies: ``_perf`` and ``_packed`` variants fix the type order."""
    return PolicyTraits(
        pairs=PairCandidates.BEST if use_pairs else PairCandidates.NONE,
        type_order=TypeOrder.FIXED if heterogeneity_aware or use_pairs else TypeOrder.SHUFFLED,
    )


class Policy(Protocol):
    """``name`` and ``traits`` are read-only so that frozen dataclasses satisfy the
    protocol. ``name`` is for people (tables, JSON); mechanisms read ``traits``."""

    @property
    def name(self) -> str: ...

    @property
    def traits(self) -> PolicyTraits: ...

    def allocate(self, inp: PolicyInput) -> Allocation: ...
