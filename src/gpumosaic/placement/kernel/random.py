"""Random's compiled half: its filter, kept per job shape and re-tested only on the nodes
whose version moved, and its picks (the i-th feasible node, the i-th fitting GPU). The two
draws stay numpy's ``rng.integers`` in Python (``placement.scorers.random``): handing a
Generator to numba costs more than the draw."""

from __future__ import annotations

from gpumosaic.kernel_cache import njit
from gpumosaic.placement.kernel.step import fits, take_gpus


@njit(cache=True)
def random_feasible(job, model_ok, cl, mask, version):  # pragma: no cover
    """Random's filter: re-test the nodes whose version moved since ``mask`` (one job
    shape's feasible nodes) was last brought up to date (``version``); how many are
    feasible. The draw itself stays in Python (``scorers.random``)."""
    num_gpu, milli, cpu, memory = job
    gpu_free, _, cpu_free, memory_free, _, node_version, _, _, _ = cl
    feasible = 0
    for n in range(node_version.shape[0]):
        if version[n] != node_version[n]:
            mask[n] = fits(
                n, num_gpu, milli, cpu, memory, model_ok, gpu_free, cpu_free, memory_free
            )
            version[n] = node_version[n]
        if mask[n]:
            feasible += 1
    return feasible


@njit(cache=True)
def random_node(i, job, gpu_free, mask, out_gpus):  # pragma: no cover
    """The ``i``-th feasible node (from 0, in node order) and how many of its GPUs fit a
    fractional job (0 for other jobs, whose GPUs are written to ``out_gpus[0]`` now)."""
    num_gpu, milli, _, _ = job
    n = -1
    for m in range(mask.shape[0]):
        if mask[m]:
            if i == 0:
                n = m
                break
            i -= 1
    if not (num_gpu == 1 and milli < 1000):
        take_gpus(n, 0, job, gpu_free, -1, out_gpus)
        return n, 0
    fitting = 0
    for g in range(gpu_free.shape[1]):
        if gpu_free[n, g] >= milli:
            fitting += 1
    return n, fitting


@njit(cache=True)
def nth_fitting_gpu(gpu_free, n, milli, i):  # pragma: no cover
    """The ``i``-th (from 0) GPU of node ``n`` with ``milli`` free."""
    for g in range(gpu_free.shape[1]):
        if gpu_free[n, g] >= milli:
            if i == 0:
                return g
            i -= 1
    return -1
