"""The cluster as Slurm has it: its nodes (``sinfo``), each node's typed GRES GPUs
(``Gres=gpu:v100:2``) and whether it is up. A node is *up* while Slurm may run jobs on it
(idle, mixed, allocated, completing); down, drained, draining, failing or not responding
(``*``) is away, and the service treats it as a lost node (runtime/supervisor/nodes.py).

The scheduler's cluster is built from these nodes the way it is from Ray's
(``cluster.discover``): a ``RayNode`` per Slurm node whose id is the Slurm node name."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpumosaic.errors import InputError
from gpumosaic.model.gpu import gpu_model
from gpumosaic.runtime.cluster import LiveCluster, RayNode, discover
from gpumosaic.runtime.executors.slurm.commands import SlurmCommands

UP_STATES = frozenset({"idle", "mixed", "allocated", "completing", "planned"})
_SEP = "|"


@dataclass(frozen=True, slots=True)
class SlurmNode:
    name: str
    addr: str
    state: str  # sinfo's %T, e.g. idle, mixed, down*, drained
    gpus: tuple[tuple[str, int], ...]  # (Slurm's GRES type as written, count)

    @property
    def up(self) -> bool:
        return self.state in UP_STATES  # "idle*" (not responding) is not

    def ray_node(self) -> RayNode:
        return RayNode(self.name, self.addr, tuple((gpu_model(t).name, c) for t, c in self.gpus))


def parse_gres(text: str) -> tuple[tuple[str, int], ...]:
    """``gpu:v100:2,gpu:k80:1(S:0)`` -> (("v100", 2), ("k80", 1)); untyped GPUs and
    other GRES are left out (a GPU model must be named for the scheduler)."""
    out = []
    for part in text.split(","):
        fields = part.split("(")[0].strip().split(":")
        if len(fields) == 3 and fields[0] == "gpu" and fields[2].isdigit() and int(fields[2]):
            out.append((fields[1], int(fields[2])))
    return tuple(out)


def read_nodes(commands: SlurmCommands, partition: str | None = None) -> list[SlurmNode]:
    """Every node (of ``partition``, when given) with typed GPUs, by name."""
    argv = ["sinfo", "--noheader", "--Node", "--format", _SEP.join(("%N", "%o", "%G", "%T"))]
    if partition:
        argv += ["--partition", partition]
    seen: dict[str, SlurmNode] = {}
    for line in commands.run(argv).splitlines():
        fields = line.strip().split(_SEP)
        if len(fields) != 4 or fields[0] in seen:
            continue  # a node in several partitions is listed once per partition
        gpus = tuple((t, c) for t, c in parse_gres(fields[2]) if _known(t))
        if gpus:
            seen[fields[0]] = SlurmNode(fields[0], fields[1], fields[3].lower(), gpus)
    return [seen[n] for n in sorted(seen)]


def _known(gres_type: str) -> bool:
    try:
        gpu_model(gres_type)
    except ValueError:
        return False
    return True


def slurm_membership(commands: SlurmCommands, partition: str | None = None) -> Sequence[RayNode]:
    """The nodes that are up, for the service's node watcher."""
    return [n.ray_node() for n in read_nodes(commands, partition) if n.up]


def gres_types(nodes: Sequence[SlurmNode]) -> dict[str, str]:
    """The scheduler's model name -> Slurm's GRES type as the admin wrote it."""
    return {gpu_model(t).name: t for n in nodes for t, _ in n.gpus}


def read_cluster(
    commands: SlurmCommands, partition: str | None = None
) -> tuple[LiveCluster, dict[str, str]]:
    """The scheduler's cluster from Slurm's nodes that are up, and the GRES types."""
    nodes = read_nodes(commands, partition)
    up = [n for n in nodes if n.up]
    if not up:
        where = f" in partition {partition}" if partition else ""
        raise InputError(
            f"Slurm has no node up{where} with typed GPUs (Gres=gpu:TYPE:N in slurm.conf; "
            f"nodes seen: {', '.join(f'{n.name} {n.state}' for n in nodes) or 'none'})",
            field="--executor",
        )
    return discover([n.ray_node() for n in up], None), gres_types(nodes)
