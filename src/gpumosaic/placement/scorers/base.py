"""What a scorer is: node-local raw scores, a normalization across feasible nodes, and the
GPU choice it makes inside the chosen node.

Raw scores depend only on the node's own state and the job's shape (cpu, gpu_milli,
num_gpu), so ``ScoredPlacement`` caches them per node and recomputes a node only when its
``node_version`` moves. Normalization (min-max for BestFit and PWR) needs all feasible
nodes and is done after the cache, every time.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement.gpu_choice import best_fit_gpu, node_gpus

# The reference normalizes resource vectors by the largest node of the Alibaba cluster.
MAX_SPEC_CPU = 128_000  # milli-CPU
MAX_SPEC_GPU = 8_000  # milli-GPU (8 GPUs)
MAX_SCORE = 100

Scores = npt.NDArray[np.float64]
Nodes = npt.NDArray[np.intp]
Slots = npt.NDArray[np.intp]


@dataclass(frozen=True, slots=True)
class KernelInputs:
    """What a compiled scorer (``placement.kernel.place_run``) reads besides the cluster's
    arrays: FGD's tracker counts and tables, worst fit's CPU scale. A scorer fills the
    fields it uses and leaves ``UNUSED`` arrays (same dtypes, empty) in the others."""

    exact: bool
    cpu_scale: float
    class_ok: npt.NDArray[np.bool_]
    c_cpu: npt.NDArray[np.int64]
    c_num_gpu: npt.NDArray[np.int64]
    weight: npt.NDArray[np.float64]
    fit_table: npt.NDArray[np.int64]
    below_table: npt.NDArray[np.int64]
    fit_count: npt.NDArray[np.int64]
    below: npt.NDArray[np.int64]
    free: npt.NDArray[np.int64]
    frag: npt.NDArray[np.float64]
    tracked: npt.NDArray[np.int64]
    d_fit: npt.NDArray[np.int64]
    d_below: npt.NDArray[np.int64]
    thresholds: npt.NDArray[np.float64]

    @classmethod
    def unused(cls, cpu_scale: float = 0.0) -> KernelInputs:
        """Inputs of a scorer that reads none of FGD's arrays."""
        ints2 = np.zeros((0, 0), dtype=np.int64)
        ints1 = np.zeros(0, dtype=np.int64)
        floats = np.zeros(0)
        return cls(
            exact=False,
            cpu_scale=cpu_scale,
            class_ok=np.zeros((0, 0), dtype=bool),
            c_cpu=ints1,
            c_num_gpu=ints1,
            weight=floats,
            fit_table=ints2,
            below_table=ints2,
            fit_count=ints2,
            below=ints2,
            free=ints1,
            frag=floats,
            tracked=ints1,
            d_fit=ints2,
            d_below=ints2,
            thresholds=floats,
        )


class Scorer(ABC):
    """Base class: identity normalization and best-fit GPU choice. Subclasses override
    ``raw_scores`` (and the rest where the reference does something else)."""

    name = "scorer"
    # Raw scores read only the node's state (``ClusterState.node_signature``) and the job's
    # shape, so nodes in the same state score the same: the placement index scores one
    # node per distinct state. A scorer that reads the node's index says so here.
    reads_node_index = False

    @abstractmethod
    def raw_scores(self, state: ClusterState, job: JobSpec, nodes: Nodes) -> Scores:
        """Scores (higher is better) for ``nodes``, all of which can hold ``job``."""

    def scores_and_slots(
        self, state: ClusterState, job: JobSpec, nodes: Nodes
    ) -> tuple[Scores, Slots | None]:
        """Raw scores and, where the scorer scores each GPU of a fractional job (FGD,
        PWR), the GPU ``fractional_slot`` would choose on each node; else ``None``."""
        return self.raw_scores(state, job, nodes), None

    def normalize(self, raw: Scores) -> Scores:
        """Scores across all feasible nodes of one decision; identity by default."""
        return raw

    def fractional_slot(
        self, state: ClusterState, job: JobSpec, node: int, rng: np.random.Generator
    ) -> int:
        """The GPU a fractional job takes on ``node``; best fit by default."""
        return best_fit_gpu(state.gpu_free[node], job.gpu_milli)

    def assignment(
        self, state: ClusterState, job: JobSpec, node: int, rng: np.random.Generator
    ) -> Assignment:
        slot = self.fractional_slot(state, job, node, rng) if job.is_fractional else -1
        return Assignment(
            job_id=job.id,
            node=node,
            gpus=node_gpus(state, job, node, slot),
            gpu_milli=job.gpu_milli if job.num_gpu else 0,
            cpu_milli=job.cpu_milli,
            memory_mib=job.memory_mib,
        )


def minmax(raw: Scores, all_equal: float) -> Scores:
    """The reference's integer min-max normalization to 0..100:
    ``(s - lowest) * 100 // (highest - lowest)``; ``all_equal`` when the range is 0."""
    lowest, highest = raw.min(), raw.max()
    if highest == lowest:
        return np.full_like(raw, all_equal)
    return np.floor((raw - lowest) * MAX_SCORE / (highest - lowest))


def trunc_div(numerator: npt.NDArray[np.int64], denominator: int) -> npt.NDArray[np.int64]:
    """Integer division truncating toward zero, as Go's ``/`` on int64 does."""
    return np.sign(numerator) * (np.abs(numerator) // denominator)


class CompiledScorer(Scorer):
    """A scorer that ``placement.kernel.place_run`` implements (``kernel_kind``: kernel.FGD
    or kernel.WORSTFIT); a strategy of that one scorer decides in compiled code."""

    kernel_kind: int

    @abstractmethod
    def kernel_inputs(self, state: ClusterState, job: JobSpec) -> KernelInputs:
        """The arrays ``place_run`` reads for this scorer."""
