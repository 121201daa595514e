"""Which GPUs the service schedules, and where they are on Ray.

Names (documented in docs/live.md): a Ray node offers GPUs of model ``M`` through the
custom resource ``gpumosaic_model_M`` (upper case, e.g. ``gpumosaic_model_V100: 4``) next
to Ray's own ``GPU`` count; start a worker with
``ray start --num-gpus 4 --resources '{"gpumosaic_model_V100": 4}'``. On local Ray,
``--cluster v100:2,k80:2`` declares the same as logical GPUs.

The scheduler's cluster has one node per (Ray node, model), and a GPU index ``g`` of that
node is the device ``device_offset + g`` of the Ray node: the executor sets the job's
``CUDA_VISIBLE_DEVICES`` to those devices itself (docs/live.md: "GPU index").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gpumosaic.errors import InputError
from gpumosaic.model.cluster import (
    DEFAULT_CPU_MILLI_PER_GPU,
    DEFAULT_MEMORY_MIB_PER_GPU,
    ClusterSpec,
    NodeSpec,
)
from gpumosaic.model.gpu import gpu_model

MODEL_RESOURCE_PREFIX = "gpumosaic_model_"


def model_resource(model_name: str) -> str:
    return MODEL_RESOURCE_PREFIX + model_name.upper()


@dataclass(frozen=True, slots=True)
class RayNode:
    """A Ray node as the service sees it (from ``ray.nodes()``)."""

    node_id: str
    ip: str
    models: tuple[tuple[str, int], ...]  # (model name, GPU count), in device order


@dataclass(frozen=True, slots=True)
class NodeSlot:
    ray_node_id: str
    ip: str
    device_offset: int


@dataclass(frozen=True, slots=True)
class LiveCluster:
    spec: ClusterSpec
    slots: tuple[NodeSlot, ...]  # one per node of ``spec``

    def devices(self, node: int, gpus: Sequence[int]) -> tuple[int, ...]:
        offset = self.slots[node].device_offset
        return tuple(offset + g for g in gpus)

    def nodes_on(self, ray_node_id: str) -> tuple[int, ...]:
        """The scheduler's nodes (indices of ``spec``) that live on one Ray node."""
        return tuple(i for i, s in enumerate(self.slots) if s.ray_node_id == ray_node_id)

    def rebind(self, old_ray_node_id: str, new: RayNode) -> LiveCluster:
        """The same cluster with the nodes that lived on ``old_ray_node_id`` now on ``new``
        (a Ray node that came back under a new id: ``nodes.NodeWatcher``). Same devices."""
        slots = tuple(
            replace(s, ray_node_id=new.node_id, ip=new.ip)
            if s.ray_node_id == old_ray_node_id
            else s
            for s in self.slots
        )
        return replace(self, slots=slots)


def parse_counts(text: str) -> list[tuple[str, int]]:
    """``v100:2,k80:2`` -> [("V100", 2), ("K80", 2)] (the ``simulate`` spelling)."""
    out: list[tuple[str, int]] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, count = part.partition(":")
        if not sep or not count.strip().isdigit() or int(count) < 1:
            raise InputError(
                f"cluster part {part!r} is not MODEL:COUNT (e.g. v100:2)", field="--cluster"
            )
        try:
            model = gpu_model(name)
        except ValueError as err:
            raise InputError(str(err), field="--cluster") from None
        out.append((model.name, int(count)))
    if not out:
        raise InputError("empty cluster spec", field="--cluster")
    return out


def local_ray_resources(counts: Sequence[tuple[str, int]]) -> tuple[int, dict[str, float]]:
    """``num_gpus`` and custom resources for ``ray.init`` of a local instance."""
    resources: dict[str, float] = {}
    for name, count in counts:
        key = model_resource(name)
        resources[key] = resources.get(key, 0.0) + count
    return sum(c for _, c in counts), resources


def ray_nodes(raw: Sequence[Mapping[str, Any]]) -> list[RayNode]:
    """Alive nodes that offer gpumosaic GPU models, in a stable order."""
    out = []
    for n in raw:
        if not n.get("Alive", n.get("alive", False)):
            continue
        res = n.get("Resources", {})
        models = tuple(
            (key[len(MODEL_RESOURCE_PREFIX) :], int(value))
            for key, value in sorted(res.items())
            if key.startswith(MODEL_RESOURCE_PREFIX) and value >= 1
        )
        if models:
            out.append(RayNode(str(n["NodeID"]), str(n["NodeManagerAddress"]), models))
    return sorted(out, key=lambda r: r.node_id)


def discover(nodes: Sequence[RayNode], declared: Sequence[tuple[str, int]] | None) -> LiveCluster:
    """The scheduler's cluster: every model GPU Ray offers, or the ``declared`` counts laid
    onto the Ray nodes that offer them (an error names what is missing)."""
    if not nodes:
        raise InputError(
            f"no Ray node offers a GPU model: start nodes with a custom resource "
            f"{MODEL_RESOURCE_PREFIX}<MODEL> (e.g. {model_resource('V100')}) per GPU",
            field="--ray-address",
        )
    left = {(r.node_id, m): c for r in nodes for m, c in r.models}
    offsets = {}
    for r in nodes:
        cursor = 0
        for m, c in r.models:
            offsets[(r.node_id, m)] = cursor
            cursor += c
    wanted = list(declared) if declared is not None else None
    specs: list[NodeSpec] = []
    slots: list[NodeSlot] = []
    used = dict.fromkeys(left, 0)
    # Several Ray nodes on one address (one machine): the name carries the node id too.
    shared_ip = {ip for ip, n in Counter(r.ip for r in nodes).items() if n > 1}

    def add(r: RayNode, model: str, count: int) -> None:
        key = (r.node_id, model)
        g = gpu_model(model)
        host = f"{r.ip}#{r.node_id[:8]}" if r.ip in shared_ip else r.ip
        specs.append(
            NodeSpec(
                name=f"{host}/{g.name.lower()}/{used[key]}",
                gpu=g,
                num_gpus=count,
                cpu_milli=DEFAULT_CPU_MILLI_PER_GPU * count,
                memory_mib=DEFAULT_MEMORY_MIB_PER_GPU * count,
            )
        )
        slots.append(NodeSlot(r.node_id, r.ip, offsets[key] + used[key]))
        used[key] += count

    if wanted is None:
        for r in nodes:
            for m, c in r.models:
                add(r, m, c)
    else:
        for model, count in wanted:
            need = count
            for r in nodes:
                key = (r.node_id, model.upper())
                free = left.get(key, 0) - used.get(key, 0)
                take = min(free, need)
                if take > 0:
                    add(r, model.upper(), take)
                    need -= take
                if need == 0:
                    break
            if need:
                raise InputError(
                    f"Ray offers fewer {model} GPUs than declared ({count}): a node needs "
                    f"the resource {model_resource(model)}",
                    field="--cluster",
                )
    return LiveCluster(ClusterSpec(tuple(specs)), tuple(slots))
