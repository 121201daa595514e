"""Gandiva's introspective packing pass: pack waiting jobs beside low-utilization ones.

A *waiting* job is a single-GPU job that makes no progress now: queued, or suspended
in a time-sliced GPU set. Lowest utilization first, each waiting job is packed beside a
job that holds a single GPU alone in its unit, on the GPU set of lowest utilization
(mean over its units of their summed utilizations, capped at 1), the partner being the
lowest-utilization job there -- if the two working sets fit in the GPU's memory, the
pair is measured, and it was not undone before on that GPU model. A placed waiting job
only moves within its server (a suspend/resume, no migration); a queued one may go to
any server its GPU model allows. The pair then runs on trial (GpuGroup decides).

The pass changes only the GPU sets; it returns which jobs it packed where, and the
decider takes them out of its queue and counts them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpumosaic.mechanisms.gandiva.config import GandivaConfig
from gpumosaic.mechanisms.gandiva.group import GandivaJob, GpuGroup
from gpumosaic.mechanisms.gandiva.rates import RateModel
from gpumosaic.mechanisms.gandiva.sets import GpuSets
from gpumosaic.model.gpu import MILLI_PER_GPU, GpuModel
from gpumosaic.model.job import JobSpec

# A pair undone on a GPU model is not tried again there: (the two job ids, model name).
BadPair = tuple[frozenset[int], str]


@dataclass(frozen=True, slots=True)
class Packed:
    """One waiting job packed beside a host in ``group``."""

    guest: GandivaJob
    group: GpuGroup
    from_queue: bool  # it was queued (not suspended in a time-sliced set)


@dataclass(frozen=True, slots=True)
class PackPass:
    packed: tuple[Packed, ...]
    changed: tuple[GpuGroup, ...]  # sets whose next event must be re-planned


def pack_waiting_jobs(
    sets: GpuSets,
    queue: Sequence[GandivaJob],
    *,
    rates: RateModel,
    config: GandivaConfig,
    bad_pairs: frozenset[BadPair] | set[BadPair],
    usable: Callable[[JobSpec], npt.NDArray[np.bool_]],
    reference: GpuModel,
    now: float,
) -> PackPass:
    """Pack as many waiting jobs as the rules allow (``reference``: the GPU model whose
    utilization ranks a queued job)."""
    single_gpu = [g for g in sets if g.k == 1]
    if not single_gpu:
        return PackPass((), ())
    waiting = _waiting_jobs(queue, single_gpu, config.max_pack_tries)
    if not waiting:
        return PackPass((), ())

    def util_of(job: GandivaJob) -> float:
        gpu = sets[job.group].gpu if job.group >= 0 else reference
        return rates.utilization(job.spec, gpu)

    waiting.sort(key=lambda j: (util_of(j), j.spec.id))
    changed: dict[int, GpuGroup] = {}
    packed: list[Packed] = []
    for guest in waiting:
        if guest.group >= 0 and len(sets[guest.group].unit_of(guest).jobs) != 1:
            continue  # it became a host earlier in this pass
        found = _best_host(sets, guest, single_gpu, rates, config, bad_pairs, usable)
        if found is None:
            continue
        group, host = found
        from_queue = guest.group < 0
        if not from_queue and guest.group != group.gid:
            source = sets[guest.group]
            source.remove(guest, now)
            changed[source.gid] = source
        group.pack(guest, host, now)
        packed.append(Packed(guest, group, from_queue))
        changed[group.gid] = group
    return PackPass(tuple(packed), tuple(changed.values()))


def _waiting_jobs(
    queue: Sequence[GandivaJob], single_gpu: list[GpuGroup], limit: int
) -> list[GandivaJob]:
    out = [
        r
        for r in queue
        if r.spec.num_gpu == 1 and r.spec.gpu_milli == MILLI_PER_GPU and r.pack_tries < limit
    ]
    for group in single_gpu:
        for unit in group.units[1:]:
            if len(unit.jobs) == 1 and unit.jobs[0].pack_tries < limit:
                out.append(unit.jobs[0])
    return out


def _best_host(
    sets: GpuSets,
    guest: GandivaJob,
    single_gpu: list[GpuGroup],
    rates: RateModel,
    config: GandivaConfig,
    bad_pairs: frozenset[BadPair] | set[BadPair],
    usable: Callable[[JobSpec], npt.NDArray[np.bool_]],
) -> tuple[GpuGroup, GandivaJob] | None:
    allowed = usable(guest.spec)
    best: tuple[float, float, int, GpuGroup, GandivaJob] | None = None
    for group in single_gpu:
        if guest.group >= 0 and group.node != sets[guest.group].node:
            continue
        if not allowed[group.node]:
            continue
        if group.gid != guest.group and group.num_jobs >= config.max_share:
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
            if (frozenset((guest.spec.id, host.spec.id)), gpu.name) in bad_pairs:
                continue
            host_util = rates.utilization(host.spec, gpu)
            if rates.utilization(guest.spec, gpu) + host_util > config.pack_util_limit:
                continue  # together they would want more than one GPU's compute
            if not rates.can_pack(guest.spec, host.spec, gpu):
                continue
            key = (group_util, host_util, host.spec.id)
            if best is None or key < best[:3]:
                best = (*key, group, host)
    return None if best is None else (best[3], best[4])
