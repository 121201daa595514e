"""What a scorer is: a compiled raw score per node, an optional min-max normalization
across the feasible nodes of a decision, and the GPU a fractional job takes on a node.

The arithmetic of every scorer is compiled (``placement.kernel.scores``, one branch per
``kernel_kind``); a scorer object names its kind and hands the kernel what it reads
besides the cluster's arrays (``kernel_inputs``). Raw scores depend only on the node's own
state and the job's shape (cpu, gpu_milli, num_gpu), so ``ScoredPlacement`` keeps them
per node and recomputes a node only when its ``node_version`` moves. Normalization
(min-max for BestFit and PWR) needs all feasible nodes and is done at every decision.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement.filter import job_args
from gpumosaic.placement.gpu_choice import node_gpus

Scores = npt.NDArray[np.float64]
Nodes = npt.NDArray[np.intp]
Slots = npt.NDArray[np.intp]


def cluster_args(state: ClusterState) -> tuple[npt.NDArray[np.generic], ...]:
    """The cluster's arrays in the order the kernel unpacks them (``kernel.scores``). The
    state updates them in place, so the tuple stays current for the state's lifetime."""
    return (
        state.gpu_free, state.gpu_tasks, state.cpu_free, state.memory_free, state.kind_count,
        state.node_version, state.num_gpus, state.gpu_capacity, state.cpu_capacity,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class KernelInputs:
    """What the compiled scorers read besides the cluster's arrays: FGD's tracker counts
    and tables, PWR's per-node watts and sockets, worst fit's CPU scale. Each member of a
    strategy fills the fields it uses (``Scorer.kernel_inputs``); the others stay empty
    arrays of the same dtypes (one compiled signature for every strategy)."""

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
    gpu_step_w: npt.NDArray[np.float64]
    sockets: npt.NDArray[np.int64]

    @classmethod
    def unused(cls) -> KernelInputs:
        """Inputs that no scorer has filled yet."""
        ints2 = np.zeros((0, 0), dtype=np.int64)
        ints1 = np.zeros(0, dtype=np.int64)
        floats = np.zeros(0)
        return cls(
            cpu_scale=0.0,
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
            gpu_step_w=floats,
            sockets=ints1,
        )

    def fgd_args(self) -> tuple[npt.NDArray[np.generic], ...]:
        """FGD's arrays in the order ``kernel.scores.score_node`` unpacks them."""
        return (
            self.class_ok, self.c_cpu, self.c_num_gpu, self.weight, self.fit_table,
            self.below_table, self.fit_count, self.below, self.free, self.frag, self.tracked,
            self.d_fit, self.d_below, self.thresholds,
        )  # fmt: skip

    def pwr_args(self) -> tuple[npt.NDArray[np.generic], ...]:
        return (self.gpu_step_w, self.sockets)


class Scorer:
    """Base class of the scorers: a subclass names its compiled kind (``kernel_kind``),
    its normalization (``all_equal``: min-max over the feasible nodes, this value when
    they all score the same; None: none) and fills what its kind reads
    (``kernel_inputs``)."""

    name = "scorer"
    kernel_kind: int
    all_equal: float | None = None
    # Whether its kind calls back into Python from the kernel (numba's object mode), which
    # only numba's JIT runs, not the ahead-of-time library (``kernel_cache``).
    object_mode = False

    def kernel_inputs(self, state: ClusterState, job: JobSpec, into: KernelInputs) -> KernelInputs:
        """``into`` with the fields this scorer reads filled for ``job``'s shape."""
        return into

    def _score(
        self, state: ClusterState, job: JobSpec, nodes: Nodes
    ) -> tuple[Scores, Slots, Scores]:
        """(raw score, fractional GPU slot, candidate scores (K, C)) of ``nodes``."""
        from gpumosaic.placement import kernel

        k = self.kernel_inputs(state, job, KernelInputs.unused())
        nodes = np.asarray(nodes, dtype=np.int64)
        width = state.gpu_free.shape[1] if job.is_fractional else 1
        raw = np.empty(len(nodes))
        slots = np.empty(len(nodes), dtype=np.int64)
        cand = np.empty((len(nodes), max(width, 1)))
        kernel.score_nodes(
            self.kernel_kind, nodes, job_args(job), cluster_args(state), k.fgd_args(),
            k.pwr_args(), k.cpu_scale, raw, slots, cand,
        )  # fmt: skip
        return raw, slots, cand[:, :width]

    def raw_scores(self, state: ClusterState, job: JobSpec, nodes: Nodes) -> Scores:
        """Scores (higher is better) for ``nodes``."""
        return self._score(state, job, nodes)[0]

    def candidate_scores(self, state: ClusterState, job: JobSpec, nodes: Nodes) -> Scores:
        """(K, C) scores of each candidate GPU choice for FGD and PWR (C = GPU slots for a
        fractional job, 1 otherwise), -inf where the GPU does not fit."""
        return self._score(state, job, nodes)[2]

    def normalize(self, raw: Scores) -> Scores:
        """Scores across all feasible nodes of one decision (``kernel.minmax``)."""
        if self.all_equal is None or not len(raw):
            return raw
        from gpumosaic.placement import kernel

        out = np.array(raw, dtype=np.float64)
        kernel.minmax(out, len(out), self.all_equal)
        return out

    def fractional_slot(
        self, state: ClusterState, job: JobSpec, node: int, rng: np.random.Generator
    ) -> int:
        """The GPU a fractional job takes on ``node``."""
        slot = int(self._score(state, job, np.array([node], dtype=np.int64))[1][0])
        if slot < 0:
            raise ValueError(f"no GPU has {job.gpu_milli} milli free")
        return slot

    def assignment(
        self, state: ClusterState, job: JobSpec, node: int, rng: np.random.Generator
    ) -> Assignment:
        slot = self.fractional_slot(state, job, node, rng) if job.is_fractional else -1
        return Assignment.of(job, node, node_gpus(state, job, node, slot))
