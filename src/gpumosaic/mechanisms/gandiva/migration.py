"""Gandiva's migration to defragment, as a pure planner over a snapshot.

When a k-GPU job finds no server with k free GPUs although free GPUs exist, Gandiva moves
jobs off one server to free GPUs elsewhere so that the job gets a whole set on one server.
The planner picks the server that needs the fewest jobs moved (then the fewest GPUs), and
evicts whole GPU sets (a time-sliced set moves with all its jobs). An evicted set goes to
another server of the same GPU model (a job's speed, and a packed pair's measurement,
stay valid), best fit: the destination with the fewest free GPUs that still hold it, so
that moves do not scatter free GPUs anew.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NodeSlots:
    node: int
    model: str
    num_gpus: int
    free_gpus: int


@dataclass(frozen=True, slots=True)
class GroupSlots:
    gid: int
    node: int
    k: int
    jobs: int


@dataclass(frozen=True, slots=True)
class Move:
    gid: int
    dest_node: int


@dataclass(frozen=True, slots=True)
class DefragPlan:
    target_node: int
    moves: tuple[Move, ...]
    jobs_moved: int
    gpus_moved: int


def plan_defrag(
    nodes: Sequence[NodeSlots],
    groups: Sequence[GroupSlots],
    k: int,
    allowed_targets: Collection[int],
) -> DefragPlan | None:
    """The cheapest set of moves that frees k GPUs on one allowed server, or None."""
    by_node: dict[int, list[GroupSlots]] = {}
    for g in groups:
        by_node.setdefault(g.node, []).append(g)
    best: DefragPlan | None = None
    for target in nodes:
        if target.node not in allowed_targets or target.num_gpus < k or target.free_gpus >= k:
            continue
        plan = _plan_for(target, nodes, by_node.get(target.node, []), k)
        if plan is not None and (
            best is None or (plan.jobs_moved, plan.gpus_moved) < (best.jobs_moved, best.gpus_moved)
        ):
            best = plan
    return best


def _plan_for(
    target: NodeSlots, nodes: Sequence[NodeSlots], resident: list[GroupSlots], k: int
) -> DefragPlan | None:
    need = k - target.free_gpus
    # Cheapest evictions first: fewest jobs per GPU freed, then small sets.
    evict: list[GroupSlots] = []
    freed = 0
    for g in sorted(resident, key=lambda g: (g.jobs / g.k, g.k, g.gid)):
        if freed >= need:
            break
        evict.append(g)
        freed += g.k
    if freed < need:
        return None
    free = {n.node: n.free_gpus for n in nodes if n.node != target.node and n.model == target.model}
    moves: list[Move] = []
    for g in sorted(evict, key=lambda g: (-g.k, g.gid)):
        fits = [node for node, f in free.items() if f >= g.k]
        if not fits:
            return None
        dest = min(fits, key=lambda node: free[node])  # best fit; ties: snapshot order
        free[dest] -= g.k
        moves.append(Move(g.gid, dest))
    return DefragPlan(
        target_node=target.node,
        moves=tuple(moves),
        jobs_moved=sum(g.jobs for g in evict),
        gpus_moved=sum(g.k for g in evict),
    )
