"""Which GPU slots of the chosen node a job takes.

Whole-GPU jobs (gpu_milli = 1000) always take the lowest-index fully free GPUs, as the
reference's exclusive allocation does. Only a fractional job (one GPU, < 1000 milli)
leaves a choice, and each strategy makes it with one of the rules here. Ties go to the
lowest slot index.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import ClusterState

GpuRow = npt.NDArray[np.int32]


def exclusive_gpus(free: GpuRow, num_gpu: int) -> tuple[int, ...]:
    """The ``num_gpu`` lowest-index fully free GPUs."""
    slots = np.flatnonzero(free >= MILLI_PER_GPU)[:num_gpu]
    if len(slots) < num_gpu:
        raise ValueError(f"only {len(slots)} fully free GPUs, {num_gpu} needed")
    return tuple(int(s) for s in slots)


def _fitting(free: GpuRow, milli: int) -> npt.NDArray[np.intp]:
    slots = np.flatnonzero(free >= milli)
    if not len(slots):
        raise ValueError(f"no GPU has {milli} milli free")
    return slots


def best_fit_gpu(free: GpuRow, milli: int) -> int:
    """The fitting GPU with the least free milli (the reference's "best" GPU choice)."""
    slots = _fitting(free, milli)
    return int(slots[np.argmin(free[slots])])


def worst_fit_gpu(free: GpuRow, milli: int) -> int:
    """The fitting GPU with the most free milli."""
    slots = _fitting(free, milli)
    return int(slots[np.argmax(free[slots])])


def first_fit_gpu(free: GpuRow, milli: int) -> int:
    """The lowest-index fitting GPU."""
    return int(_fitting(free, milli)[0])


def random_gpu(free: GpuRow, milli: int, rng: np.random.Generator) -> int:
    """A fitting GPU chosen uniformly at random."""
    slots = _fitting(free, milli)
    return int(slots[rng.integers(len(slots))])


def node_gpus(
    state: ClusterState, job: JobSpec, node: int, fractional_slot: int
) -> tuple[int, ...]:
    """The slots ``job`` takes on ``node``: none for CPU-only jobs, the exclusive rule for
    whole GPUs, ``fractional_slot`` (chosen by the strategy) for a fractional job."""
    if job.num_gpu == 0:
        return ()
    if job.is_fractional:
        return (fractional_slot,)
    return exclusive_gpus(state.gpu_free[node], job.num_gpu)
