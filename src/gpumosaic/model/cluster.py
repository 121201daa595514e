"""Cluster description: nodes, each with one GPU model, a GPU count, CPU and memory."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpumosaic.model.gpu import GpuModel, gpu_model

# A node built from a ``MODEL:COUNT`` spec gets this much CPU and memory, enough that
# they never constrain Gavel-style experiments (which model GPUs only).
DEFAULT_CPU_MILLI_PER_GPU = 16_000
DEFAULT_MEMORY_MIB_PER_GPU = 131_072


# The largest cluster a description may ask for: 16 times Alibaba's openb cluster (6,212
# GPUs); state arrays and per-round work grow with it.
MAX_CLUSTER_GPUS = 100_000


@dataclass(frozen=True, slots=True)
class NodeSpec:
    name: str
    gpu: GpuModel
    num_gpus: int
    cpu_milli: int
    memory_mib: int


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    nodes: tuple[NodeSpec, ...]

    @property
    def num_gpus(self) -> int:
        return sum(n.num_gpus for n in self.nodes)

    @property
    def gpu_models(self) -> tuple[GpuModel, ...]:
        """Distinct GPU models in order of first appearance."""
        seen: dict[str, GpuModel] = {}
        for n in self.nodes:
            seen.setdefault(n.gpu.name, n.gpu)
        return tuple(seen.values())

    def gpus_per_model(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for n in self.nodes:
            out[n.gpu.name] = out.get(n.gpu.name, 0) + n.num_gpus
        return out

    @classmethod
    def from_counts(cls, counts: Iterable[tuple[str, int]], gpus_per_node: int = 1) -> ClusterSpec:
        """``[("v100", 4)]`` -> 4 one-GPU V100 servers (Gavel's default of 1 GPU per server).

        A count that is not a multiple of ``gpus_per_node`` leaves a smaller last node.
        """
        nodes: list[NodeSpec] = []
        counts = list(counts)
        total = sum(count for _, count in counts)
        if total > MAX_CLUSTER_GPUS:
            raise ValueError(
                f"{total:,} GPUs is over the limit of {MAX_CLUSTER_GPUS:,} per cluster"
            )
        for model_name, count in counts:
            model = gpu_model(model_name)
            if count < 0:
                raise ValueError(f"negative GPU count {count} for {model_name}")
            left = count
            while left > 0:
                k = min(gpus_per_node, left)
                nodes.append(
                    NodeSpec(
                        name=f"{model.name.lower()}-{len(nodes):04d}",
                        gpu=model,
                        num_gpus=k,
                        cpu_milli=DEFAULT_CPU_MILLI_PER_GPU * k,
                        memory_mib=DEFAULT_MEMORY_MIB_PER_GPU * k,
                    )
                )
                left -= k
        if not nodes:
            raise ValueError("a cluster needs at least one GPU")
        return cls(tuple(nodes))
