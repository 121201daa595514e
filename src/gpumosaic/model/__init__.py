"""Frozen value types (GPU models, nodes, clusters, jobs) and the mutable ClusterState.

The names load on first use (PEP 562): ``gpumosaic.model.gpu``, ``.job`` and ``.cluster``
are plain Python, and parsing a ``--cluster`` (a user mistake's one line) must not pay
for ``model.state``'s numpy."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'gpumosaic.model' has no attribute {name!r}")
    return getattr(importlib.import_module(f"gpumosaic.model.{module}"), name)


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
