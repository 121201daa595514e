"""Gandiva's introspective packing pass: pack waiting jobs beside low-utilization ones.

A *waiting* job is a single-GPU job that makes no progress now: queued, or suspended
in a time-sliced GPU set. Lowest utilization first, each waiting job is packed beside a
job that holds a single GPU alone in its unit, on the GPU set of lowest utilization
(mean over its units of their summed utilizations, capped at 1), the partner being the
lowest-utilization job there -- if the two working sets fit in the GPU's memory, the
pair is measured, and it was not undone before on that GPU model. A placed waiting job
only moves within its server (a suspend/resume, no migration); a queued one may go to
any server its GPU model allows. The pair then runs on trial (GpuGroup decides).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.sim.gandiva.group import GpuGroup, JobRun

if TYPE_CHECKING:
    from gpumosaic.sim.gandiva.simulator import GandivaSimulator


@dataclass(slots=True)
class PackCounters:
    tried: int = 0
    kept: int = 0
    undone: int = 0
    bad_pairs: set[tuple[frozenset[int], str]] = field(default_factory=set)


def pack_waiting_jobs(sim: GandivaSimulator, now: float) -> list[GpuGroup]:
    """Pack as many waiting jobs as the rules allow; returns the groups that changed."""
    single_gpu = [g for g in sim.groups.values() if g.k == 1]
    if not single_gpu:
        return []
    waiting = _waiting_jobs(sim, single_gpu)
    if not waiting:
        return []
    reference = sim.cluster.gpu_models[0]
    rates = sim.rates

    def util_of(job: JobRun) -> float:
        gpu = sim.groups[job.group].gpu if job.group >= 0 else reference
        return rates.utilization(job.spec, gpu)

    waiting.sort(key=lambda j: (util_of(j), j.spec.id))
    changed: dict[int, GpuGroup] = {}
    for guest in waiting:
        if guest.group >= 0 and len(sim.groups[guest.group].unit_of(guest).jobs) != 1:
            continue  # it became a host earlier in this pass
        found = _best_host(sim, guest, single_gpu)
        if found is None:
            continue
        group, host = found
        if guest.group >= 0 and guest.group != group.gid:
            source = sim.groups[guest.group]
            source.remove(guest, now)
            changed[source.gid] = source
        elif guest.group < 0:
            sim.queue.remove(guest)
        group.pack(guest, host, now)
        sim.started(guest, group)
        sim.pack.tried += 1
        changed[group.gid] = group
    return list(changed.values())


def _waiting_jobs(sim: GandivaSimulator, single_gpu: list[GpuGroup]) -> list[JobRun]:
    limit = sim.config.max_pack_tries
    out = [
        r
        for r in sim.queue
        if r.spec.num_gpu == 1 and r.spec.gpu_milli == MILLI_PER_GPU and r.pack_tries < limit
    ]
    for group in single_gpu:
        for unit in group.units[1:]:
            if len(unit.jobs) == 1 and unit.jobs[0].pack_tries < limit:
                out.append(unit.jobs[0])
    return out


def _best_host(
    sim: GandivaSimulator, guest: JobRun, single_gpu: list[GpuGroup]
) -> tuple[GpuGroup, JobRun] | None:
    rates = sim.rates
    allowed = sim.usable(guest.spec)
    best: tuple[float, float, int, GpuGroup, JobRun] | None = None
    for group in single_gpu:
        if guest.group >= 0 and group.node != sim.groups[guest.group].node:
            continue
        if not allowed[group.node]:
            continue
        if group.gid != guest.group and group.num_jobs >= sim.config.max_share:
            continue  # a guest from elsewhere would take the set past max_share jobs
        gpu = group.gpu
        group_util = sum(
            min(1.0, sum(rates.utilization(j.spec, gpu) for j in u.jobs)) for u in group.units
        ) / len(group.units)
        if best is not None and group_util > best[0]:
            continue
        for unit in group.units:
            if len(unit.jobs) != 1 or unit.jobs[0] is guest:
                continue
            host = unit.jobs[0]
            if (frozenset((guest.spec.id, host.spec.id)), gpu.name) in sim.pack.bad_pairs:
                continue
            host_util = rates.utilization(host.spec, gpu)
            if rates.utilization(guest.spec, gpu) + host_util > sim.config.pack_util_limit:
                continue  # together they would want more than one GPU's compute
            if not rates.can_pack(guest.spec, host.spec, gpu):
                continue
            key = (group_util, host_util, host.spec.id)
            if best is None or key < best[:3]:
                best = (*key, group, host)
    return None if best is None else (best[3], best[4])
