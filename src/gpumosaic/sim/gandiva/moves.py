"""Moving jobs between GPU sets: Gandiva's defragmenting migration and the spreading of
waiting (time-sliced or packed) jobs onto GPUs that became free.

A move within a server is a suspend/resume (``switch_s``, counted as a hand-over); a move
to another server is a migration (``migration_cost_s`` of lost progress, counted per job)
and happens only with migration on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import Assignment
from gpumosaic.sim.gandiva.affinity import choose_server
from gpumosaic.sim.gandiva.group import GpuGroup, JobRun
from gpumosaic.sim.gandiva.migration import GroupSlots, NodeSlots, plan_defrag

if TYPE_CHECKING:
    from gpumosaic.sim.gandiva.simulator import GandivaSimulator


def move_job(sim: GandivaSimulator, job: JobRun, dest_node: int, now: float) -> GpuGroup:
    """Move one job to a new GPU set on ``dest_node`` (a resume here, a migration there)."""
    src = sim.groups[job.group]
    src.remove(job, now)
    if src.units:
        sim.replan(src)
    else:
        sim.close_group(src)
    same_node = dest_node == src.node
    cost = sim.config.switch_s if same_node else sim.config.migration_cost_s
    if same_node:
        job.handovers += 1
    else:
        job.migrations += 1
        sim.migrations += 1
    dest = sim.open_group(dest_node, max(1, job.spec.num_gpu), now)
    dest.add(job, now, resume_cost_s=cost)
    sim.replan(dest)
    return dest


def defragment(sim: GandivaSimulator, job: JobSpec, k: int) -> bool:
    """Free k GPUs on one server by moving the fewest jobs away; False if impossible."""
    now = sim.engine.now
    free = sim.free_counts()
    nodes = [
        NodeSlots(n, sim.cluster.nodes[n].gpu.name, int(sim.state.num_gpus[n]), int(free[n]))
        for n in sim.order
    ]
    groups = [GroupSlots(g.gid, g.node, g.k, g.num_jobs) for g in sim.groups.values()]
    allowed = set(np.flatnonzero(sim.usable(job)).tolist())
    plan = plan_defrag(nodes, groups, k, allowed)
    if plan is None:
        return False
    sim.defrags += 1
    for move in plan.moves:
        group = sim.groups[move.gid]
        group.settle(now)
        relocate(sim, group, move.dest_node, now)
    return True


def relocate(sim: GandivaSimulator, group: GpuGroup, dest_node: int, now: float) -> None:
    """Move a whole GPU set, with every job in it, to another server."""
    sim.advance_held(now)
    sim.state.release(-(group.gid + 1))
    sim.node_groups[group.node].discard(group.gid)
    if not sim.node_groups[group.node]:
        sim.affinity[group.node] = 0
    free = np.flatnonzero(
        sim.state.gpu_exists[dest_node] & (sim.state.gpu_free[dest_node] == MILLI_PER_GPU)
    )
    gpus = tuple(int(g) for g in free[: group.k])
    sim.state.allocate(Assignment(-(group.gid + 1), dest_node, gpus, MILLI_PER_GPU, 0, 0))
    if not sim.node_groups[dest_node]:
        sim.affinity[dest_node] = group.k
    sim.node_groups[dest_node].add(group.gid)
    group.node, group.gpus = dest_node, gpus
    group.paused_until = max(group.paused_until, now + sim.config.migration_cost_s)
    group.slice_end = max(group.slice_end, group.paused_until + sim.config.quantum_s)
    for job in group.jobs():
        job.migrations += 1
        sim.migrations += 1
    sim.replan(group)


def spread(sim: GandivaSimulator, now: float) -> None:
    """Move waiting time-sliced jobs, then packed partners, onto free GPUs."""
    while sim.free_counts().sum() > 0:
        moved = False
        crowded = sorted(
            (g for g in sim.groups.values() if len(g.units) > 1),
            key=lambda g: (-len(g.units), g.gid),
        )
        paired = [g for g in sim.groups.values() if len(g.units) == 1 and any(g.pairs())]
        for group in [*crowded, *paired]:
            job = _movable(group)
            dest = None if job is None else _free_destination(sim, job, group.node)
            if job is not None and dest is not None:
                group.settle(now)
                move_job(sim, job, dest, now)
                sim.spread_moves += 1
                moved = True
                break
        if not moved:
            return


def _movable(group: GpuGroup) -> JobRun | None:
    if len(group.units) > 1:
        singles = [u for u in group.units[1:] if len(u.jobs) == 1]
        return singles[-1].jobs[0] if singles else None
    pair = next(group.pairs(), None)
    if pair is None:
        return None
    return pair.guest if pair.guest is not None else pair.jobs[-1]


def _free_destination(sim: GandivaSimulator, job: JobRun, src_node: int) -> int | None:
    k = max(1, job.spec.num_gpu)
    if sim.free_counts()[src_node] >= k:
        return src_node
    if not sim.config.migration:
        return None
    views = [v for v in sim.views(k, job.spec) if v.node != src_node]
    share, rank = sim.config.max_share, sim.rank(job.spec, k)
    choice = choose_server(views, k, oversubscribe=False, max_share=share, rank=rank)
    return None if choice is None else choice.node
