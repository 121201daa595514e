"""Filter stage: which nodes can hold a job now, and why not when none can."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import ClusterState


class Reason(StrEnum):
    """Why a job is not placed. The value is the code shown to users."""

    GPU_MODEL = "gpu_model"  # no node has a GPU model the job allows
    CPU = "cpu"  # allowed nodes lack free CPU
    MEMORY = "memory"  # ... lack free memory
    GPU = "gpu"  # ... lack num_gpu GPUs with gpu_milli free each
    NEVER_FITS = "never_fits"  # no node could hold it even when the cluster is empty


@dataclass(frozen=True, slots=True)
class Verdict:
    """The answer to "why is job N not running?"."""

    job_id: int
    reason: Reason
    detail: str


JobArgs = tuple[int, int, int, int]
_INT64 = np.iinfo(np.int64)


def _int64(value: int) -> int:
    return max(min(value, int(_INT64.max)), int(_INT64.min))


def job_args(job: JobSpec) -> JobArgs:
    """The compiled kernel's view of a job: (num_gpu, milli (0 for CPU-only), cpu, memory).
    A request beyond int64 (an absurd pod) is clamped into int64: every node compares
    with it as with the exact value (none has that much), and the kernel takes machine
    integers."""
    return (
        _int64(job.num_gpu),
        _int64(job.gpu_milli) if job.num_gpu else 0,
        _int64(job.cpu_milli),
        _int64(job.memory_mib),
    )


def feasible_nodes(state: ClusterState, job: JobSpec) -> npt.NDArray[np.bool_]:
    """Boolean mask over nodes that can hold ``job`` now."""
    return feasible_among(state, job, np.arange(state.num_nodes, dtype=np.int64))


# What the filter sees of a job: two jobs with the same key fit exactly the same nodes.
FilterKey = tuple[int, int, int, int, frozenset[str] | None]


def filter_key(job: JobSpec) -> FilterKey:
    """(num_gpu, gpu_milli, cpu_milli, memory_mib, allowed models); a CPU-only job's GPU
    fields are normalized away, since the filter ignores them."""
    if job.num_gpu == 0:
        return (0, 0, job.cpu_milli, job.memory_mib, None)
    return (job.num_gpu, job.gpu_milli, job.cpu_milli, job.memory_mib, job.allowed_models)


def feasible_among(
    state: ClusterState, job: JobSpec, nodes: npt.NDArray[np.intp]
) -> npt.NDArray[np.bool_]:
    """``feasible_nodes`` for some nodes only: enough free CPU and memory, and for a GPU
    job an allowed GPU model and ``num_gpu`` GPUs with ``gpu_milli`` free each. Compiled
    (``kernel.step.fits``, the filter every placement applies), one call for all nodes."""
    from gpumosaic.placement import kernel

    out = np.empty(len(nodes), dtype=np.bool_)
    kernel.fits_among(
        np.asarray(nodes, dtype=np.int64),
        job_args(job),
        state.model_mask(job.allowed_models if job.num_gpu else None),
        state.gpu_free, state.cpu_free, state.memory_free, out,
    )  # fmt: skip
    return out


def feasible_shapes_among(
    state: ClusterState, jobs: Sequence[JobSpec], nodes: npt.NDArray[np.intp]
) -> npt.NDArray[np.bool_]:
    """(len(jobs), len(nodes)): row i is ``feasible_among(state, jobs[i], nodes)``, for
    many jobs in one vectorized pass (a driver testing every waiting job shape at once)."""
    cpu = np.array([job.cpu_milli for job in jobs], dtype=np.int64)
    memory = np.array([job.memory_mib for job in jobs], dtype=np.int64)
    num_gpu = np.array([job.num_gpu for job in jobs], dtype=np.int64)
    milli = np.array([job.gpu_milli for job in jobs], dtype=np.int64)
    ok = (state.cpu_free[nodes] >= cpu[:, None]) & (state.memory_free[nodes] >= memory[:, None])
    models = (
        np.stack(
            [
                state.model_mask(job.allowed_models)[nodes]
                if job.num_gpu
                else np.ones(len(nodes), dtype=bool)
                for job in jobs
            ]
        )
        if len(jobs)
        else np.zeros((0, len(nodes)), dtype=bool)
    )
    fitting = (state.gpu_free[nodes][None, :, :] >= milli[:, None, None]).sum(axis=2)
    feasible: npt.NDArray[np.bool_] = ok & models & (fitting >= num_gpu[:, None])
    return feasible


def explain(state: ClusterState, job: JobSpec) -> Verdict:
    """Name the first filter that leaves no node, in the order GPU model, CPU, memory, GPU."""
    if not state.fits_when_empty(job):
        return Verdict(job.id, Reason.NEVER_FITS, _never_fits_detail(state, job))
    mask = state.model_mask(job.allowed_models) if job.num_gpu else np.ones(state.num_nodes, bool)
    if not mask.any():
        allowed = ",".join(sorted(job.allowed_models or ()))
        return Verdict(job.id, Reason.GPU_MODEL, f"no node has a GPU model in {{{allowed}}}")
    mask = mask & (state.cpu_free >= job.cpu_milli)
    if not mask.any():
        return Verdict(job.id, Reason.CPU, f"no allowed node has {job.cpu_milli} milli-CPU free")
    mask = mask & (state.memory_free >= job.memory_mib)
    if not mask.any():
        return Verdict(job.id, Reason.MEMORY, f"no node has {job.memory_mib} MiB free")
    return Verdict(
        job.id,
        Reason.GPU,
        f"no node has {job.num_gpu} GPU(s) with {job.gpu_milli} milli free",
    )


# What ``explain`` can say of a single node, in its order (a node whose GPU model the job
# does not allow could never hold it, so GPU_MODEL is NEVER_FITS for one node).
NODE_REASONS = (Reason.NEVER_FITS, Reason.CPU, Reason.MEMORY, Reason.GPU)


def node_reasons(
    state: ClusterState, job: JobSpec, nodes: npt.NDArray[np.intp]
) -> npt.NDArray[np.int8]:
    """For each of ``nodes``, the index in NODE_REASONS of what ``explain`` says when the
    cluster is that node alone, or -1 where the node can hold ``job`` now. One vectorized
    pass (the Kubernetes extender names a reason for every failed node)."""
    n = np.asarray(nodes, dtype=np.intp)
    fits_empty = (state.cpu_capacity[n] >= job.cpu_milli) & (
        state.memory_capacity[n] >= job.memory_mib
    )
    if job.num_gpu:
        fits_empty &= state.model_mask(job.allowed_models)[n] & (state.num_gpus[n] >= job.num_gpu)
    codes = np.full(len(n), -1, dtype=np.int8)
    codes[~feasible_among(state, job, n)] = 3
    codes[state.memory_free[n] < job.memory_mib] = 2
    codes[state.cpu_free[n] < job.cpu_milli] = 1
    codes[~fits_empty] = 0
    return codes


def _never_fits_detail(state: ClusterState, job: JobSpec) -> str:
    parts = [f"num_gpu={job.num_gpu}", f"gpu_milli={job.gpu_milli}"]
    if job.cpu_milli:
        parts.append(f"cpu_milli={job.cpu_milli}")
    if job.memory_mib:
        parts.append(f"memory_mib={job.memory_mib}")
    if job.allowed_models is not None:
        parts.append("gpu_spec=" + "|".join(sorted(job.allowed_models)))
    widest = int(state.num_gpus.max()) if state.num_nodes else 0
    return f"no node can ever hold {' '.join(parts)} (widest node: {widest} GPUs)"
