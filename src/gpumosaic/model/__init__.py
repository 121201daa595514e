"""Frozen value types (GPU models, nodes, clusters, jobs) and the mutable ClusterState.

The names load on first use (PEP 562): ``gpumosaic.model.gpu``, ``.job`` and ``.cluster``
are plain Python, and parsing a ``--cluster`` (a user mistake's one line) must not pay
for ``model.state``'s numpy."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpumosaic.lazy import lazy_names

if TYPE_CHECKING:
    from gpumosaic.model.cluster import ClusterSpec, NodeSpec
    from gpumosaic.model.gpu import GPU_MODELS, GpuModel, gpu_model
    from gpumosaic.model.job import JobSpec
    from gpumosaic.model.state import Assignment, ClusterState

# name -> the module under gpumosaic.model that defines it
_WHERE = {
    "GPU_MODELS": "gpu",
    "GpuModel": "gpu",
    "gpu_model": "gpu",
    "ClusterSpec": "cluster",
    "NodeSpec": "cluster",
    "JobSpec": "job",
    "Assignment": "state",
    "ClusterState": "state",
}


__getattr__ = lazy_names(__name__, _WHERE)


__all__ = [
    "GPU_MODELS",
    "Assignment",
    "ClusterSpec",
    "ClusterState",
    "GpuModel",
    "JobSpec",
    "NodeSpec",
    "gpu_model",
]
