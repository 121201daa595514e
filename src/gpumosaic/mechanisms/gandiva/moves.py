"""Moving jobs between GPU sets: Gandiva's defragmenting migration and the spreading of
waiting (time-sliced or packed) jobs onto GPUs that became free.

A move within a server is a suspend/resume (``switch_s``, counted as a hand-over); a move
to another server is a migration (``migration_cost_s`` of lost progress, counted per job)
and happens only with migration on. Each step changes the GPU sets through their owner
(``GpuSets``) and returns the counts of what it did.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from gpumosaic.mechanisms.gandiva.actions import Migrate, MoveReason
from gpumosaic.mechanisms.gandiva.config import GandivaConfig
from gpumosaic.mechanisms.gandiva.counters import GandivaCounters
from gpumosaic.mechanisms.gandiva.group import GandivaJob, GpuGroup
from gpumosaic.mechanisms.gandiva.migration import GroupSlots, NodeSlots, plan_defrag
from gpumosaic.mechanisms.gandiva.sets import GpuSets
from gpumosaic.model.job import JobSpec

# (job, k, server to avoid) -> a server with k free GPUs by the affinity order, or None.
FindElsewhere = Callable[[JobSpec, int, int], int | None]


def move_job(
    sets: GpuSets, job: GandivaJob, dest_node: int, now: float, config: GandivaConfig
) -> int:
    """Move one job to a new GPU set on ``dest_node`` (a resume there on the same server,
    a migration to another); returns the migrations made (0 or 1)."""
    src = sets[job.group]
    src.remove(job, now)
    if src.units:
        sets.replan(src)
    else:
        sets.close(src, now)
    same_node = dest_node == src.node
    cost = config.switch_s if same_node else config.migration_cost_s
    if same_node:
        job.handovers += 1
    else:
        job.migrations += 1
    dest = sets.open(dest_node, max(1, job.spec.num_gpu), now)
    dest.add(job, now, resume_cost_s=cost)
    sets.record(Migrate(job.id, src.node, dest_node, dest.gpus, MoveReason.SPREAD, now + cost))
    sets.replan(dest)
    return 0 if same_node else 1


def defragment(
    sets: GpuSets, allowed: npt.NDArray[np.bool_], k: int, now: float
) -> GandivaCounters | None:
    """Free k GPUs on one allowed server by moving the fewest jobs away; None if impossible."""
    free = sets.free_counts()
    nodes = [
        NodeSlots(n, sets.cluster.nodes[n].gpu.name, int(sets.state.num_gpus[n]), int(free[n]))
        for n in sets.order
    ]
    # A gang (a set across servers) is never moved: it is no candidate to evict.
    groups = [GroupSlots(g.gid, g.node, g.k, g.num_jobs) for g in sets if not g.more]
    plan = plan_defrag(nodes, groups, k, set(np.flatnonzero(allowed).tolist()))
    if plan is None:
        return None
    migrations = 0
    for move in plan.moves:
        group = sets[move.gid]
        group.settle(now)
        migrations += sets.relocate(group, move.dest_node, now)
    return GandivaCounters(migrations=migrations, defragmentations=1)


def spread(
    sets: GpuSets, now: float, config: GandivaConfig, elsewhere: FindElsewhere
) -> GandivaCounters:
    """Move waiting time-sliced jobs, then packed partners, onto free GPUs."""
    migrations = moves = 0
    while sets.free_counts().sum() > 0:
        moved = False
        crowded = sorted(
            (g for g in sets if len(g.units) > 1),
            key=lambda g: (-len(g.units), g.gid),
        )
        paired = [g for g in sets if len(g.units) == 1 and any(g.pairs())]
        for group in [*crowded, *paired]:
            job = _movable(group)
            dest = (
                None if job is None else _free_destination(sets, job, group.node, config, elsewhere)
            )
            if job is not None and dest is not None:
                group.settle(now)
                migrations += move_job(sets, job, dest, now, config)
                moves += 1
                moved = True
                break
        if not moved:
            break
    return GandivaCounters(migrations=migrations, spread_moves=moves)


def _movable(group: GpuGroup) -> GandivaJob | None:
    if len(group.units) > 1:
        singles = [u for u in group.units[1:] if len(u.jobs) == 1]
        return singles[-1].jobs[0] if singles else None
    pair = next(group.pairs(), None)
    if pair is None:
        return None
    return pair.guest if pair.guest is not None else pair.jobs[-1]


def _free_destination(
    sets: GpuSets, job: GandivaJob, src_node: int, config: GandivaConfig, elsewhere: FindElsewhere
) -> int | None:
    k = max(1, job.spec.num_gpu)
    if sets.free_counts()[src_node] >= k:
        return src_node
    if not config.migration:
        return None
    return elsewhere(job.spec, k, src_node)
