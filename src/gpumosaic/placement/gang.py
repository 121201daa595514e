"""Placing a job that may span servers: one GPU at a time through the strategy, then all
of them at once (a gang) or nothing. Shared by the event and round mechanisms.

A job spans servers only if ``JobSpec.may_span_nodes`` says it may (Gavel's distributed
jobs; never a Kubernetes pod) and no single server can hold it now.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement.base import PlacementStrategy


def gang_parts(
    state: ClusterState, strategy: PlacementStrategy, job: JobSpec, rng: np.random.Generator
) -> tuple[Assignment, ...] | None:
    """One part per server for ``job`` (whole GPUs; CPU and memory split per GPU), chosen
    GPU by GPU by ``strategy``, or None when its GPUs are not all free. ``state`` is left
    as it was: the caller allocates the gang (``state.allocate_gang``)."""
    k = job.num_gpu
    piece_ids = [-(2**62) - i for i in range(k)]  # never a real holder id
    pieces: list[Assignment] = []
    for pid in piece_ids:
        piece = replace(
            job, id=pid, num_gpu=1, cpu_milli=job.cpu_milli // k, memory_mib=job.memory_mib // k
        )
        a = strategy.place(state, piece, rng)
        if a is None:
            break
        state.allocate(a)
        pieces.append(a)
    for a in pieces:
        state.release(a.job_id)
    if len(pieces) < k:
        return None
    by_node: dict[int, list[Assignment]] = {}
    for a in pieces:
        by_node.setdefault(a.node, []).append(a)
    return tuple(
        Assignment(
            job_id=job.id,
            node=node,
            gpus=tuple(g for a in group for g in a.gpus),
            gpu_milli=job.gpu_milli,
            cpu_milli=sum(a.cpu_milli for a in group),
            memory_mib=sum(a.memory_mib for a in group),
        )
        for node, group in by_node.items()
    )


def could_span(state: ClusterState, job: JobSpec, usable: np.ndarray | None = None) -> bool:
    """Could ``job`` ever run on an empty cluster when it may span servers: some GPU model
    it allows (and, given ``usable``, a mask over nodes, that gives it a speed) has
    ``num_gpu`` GPUs in all, on servers that can each hold one GPU's share of its CPU and
    memory."""
    if not (job.may_span_nodes and job.num_gpu > 1):
        return False
    k = job.num_gpu
    cpu, memory = job.cpu_milli // k, job.memory_mib // k
    ok = (
        state.model_mask(job.allowed_models)
        & (state.cpu_capacity >= cpu)
        & (state.memory_capacity >= memory)
    )
    if usable is not None:
        ok &= usable
    for model in np.unique(state.node_model[ok]).tolist():
        nodes = ok & (state.node_model == model)
        if int(state.num_gpus[nodes].sum()) >= k:
            return True
    return False
