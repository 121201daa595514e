"""Random: one feasible node uniformly at random, and a random fitting GPU on it.

The filter and the picks are compiled (``placement.kernel.random``: ``random_feasible``,
``random_node``, ``nth_fitting_gpu``); the two draws -- the node among the feasible ones
in node order, then a fractional job's GPU among the fitting ones -- are numpy's own
``rng.integers`` calls on the run's Generator, in Python. numba can draw from a numpy
Generator with the same algorithm (its ``Generator.integers`` matches numpy's draw for
draw), but passing a Generator into a compiled function costs ~30 us per call (numba
builds its type and unboxes it through ctypes each time), more than the whole decision;
two compiled calls around a Python draw cost ~10 us.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpumosaic.kernel_cache import resolve
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement.filter import FilterKey, JobArgs, filter_key, job_args
from gpumosaic.placement.scorers.base import cluster_args


@dataclass(slots=True)
class _Shape:
    """One job shape's ``kernel.random_feasible`` arguments (its feasible mask and the
    node versions it was tested at among them), and the GPU output buffer."""

    args: tuple[object, ...]
    job: JobArgs
    mask: npt.NDArray[np.bool_]
    taken: int
    gpus: npt.NDArray[np.int64]
    gpus_row: npt.NDArray[np.int64]
    # The three kernels, resolved for this shape's argument types (``kernel_cache.resolve``).
    feasible: Callable[..., int]
    node: Callable[..., tuple[int, int]]
    nth_gpu: Callable[..., int]


class RandomPlacement:
    """Not a scorer: the reference picks the node in PreScore, so it cannot be weighted.

    The feasible nodes of each job shape are kept current incrementally (re-tested where
    a node's version moved), so a decision costs one pass over a boolean mask.
    """

    name = "random"

    def __init__(self) -> None:
        self._state: ClusterState | None = None
        self._shapes: dict[FilterKey, _Shape] = {}

    def place(
        self, state: ClusterState, job: JobSpec, rng: np.random.Generator
    ) -> Assignment | None:
        choice = self.choose(state, job, rng)
        if choice is None:
            return None
        return Assignment.of(job, *choice)

    def choose(
        self, state: ClusterState, job: JobSpec, rng: np.random.Generator
    ) -> tuple[int, tuple[int, ...]] | None:
        shape = self._shape(state, job)
        feasible = shape.feasible(*shape.args)
        if not feasible:
            return None
        node, fitting = shape.node(
            int(rng.integers(feasible)), shape.job, state.gpu_free, shape.mask, shape.gpus
        )
        if fitting:  # a fractional job: its GPU among the fitting ones
            pick = int(rng.integers(fitting))
            return node, (shape.nth_gpu(state.gpu_free, node, shape.job[1], pick),)
        return node, tuple(shape.gpus_row.tolist())

    def _shape(self, state: ClusterState, job: JobSpec) -> _Shape:
        if self._state is not state:
            self._state, self._shapes = state, {}
        key = filter_key(job)
        shape = self._shapes.get(key)
        if shape is None:
            from gpumosaic.placement import kernel

            job_arg = job_args(job)
            mask = np.zeros(state.num_nodes, dtype=bool)  # feasible
            args = (
                job_arg,
                state.model_mask(job.allowed_models if job.num_gpu else None),
                cluster_args(state),
                mask,
                np.full(state.num_nodes, -1, dtype=np.int64),  # tested at node version
            )
            taken = 0 if job.num_gpu == 0 else (1 if job.is_fractional else job.num_gpu)
            gpus = np.zeros((1, max(taken, 1)), dtype=np.int64)
            shape = _Shape(
                args, job_arg, mask, taken, gpus, gpus[0, :taken],
                # Each call passes these types (ints, the shape's arrays, the state's).
                resolve(kernel.random_feasible, *args),
                resolve(kernel.random_node, 0, job_arg, state.gpu_free, mask, gpus),
                resolve(kernel.nth_fitting_gpu, state.gpu_free, 0, job_arg[1], 0),
            )  # fmt: skip
            self._shapes[key] = shape
        return shape
