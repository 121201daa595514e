"""Frozen value types (GPU models, nodes, clusters, jobs) and the mutable ClusterState."""

from gpumosaic.model.cluster import ClusterSpec, NodeSpec
from gpumosaic.model.gpu import GPU_MODELS, GpuModel, gpu_model
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import Assignment, ClusterState

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
