"""Which GPU slots of the chosen node a job takes.

Whole-GPU jobs (gpu_milli = 1000) always take the lowest-index fully free GPUs, as the
reference's exclusive allocation does. Only a fractional job (one GPU, < 1000 milli)
leaves a choice, and each strategy makes it with its scorer's rule, compiled with the
scores (``placement.kernel.scores``: best fit, first fit, worst fit, FGD's and PWR's best
candidate; Random draws). Ties go to the lowest slot index.
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


def best_fit_gpu(free: GpuRow, milli: int) -> int:
    """The fitting GPU with the least free milli (the reference's "best" GPU choice; the
    scorers' own rule, ``kernel.scores.best_fit_slot``)."""
    from gpumosaic.placement import kernel

    slot = int(kernel.best_fit_slot(np.ascontiguousarray(free, dtype=np.int32)[None, :], 0, milli))
    if slot < 0:
        raise ValueError(f"no GPU has {milli} milli free")
    return slot


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
