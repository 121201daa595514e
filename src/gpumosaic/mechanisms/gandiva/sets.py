"""Gandiva's servers and the GPU sets held on them: the one owner of that bookkeeping.

A GPU set (a ``GpuGroup``) is held in ClusterState as one assignment (a gang of them, one
per server, for a job that fits only across servers) with the pseudo job id
``-(gid + 1)``: ClusterState keeps "which GPUs are held", the groups keep "which jobs
take turns on them". ``GpuSets`` opens, closes and relocates sets, keeps each server's
affinity (the GPU count of the sets on it, 0 while it is empty), the GPU-seconds held and
and which sets' next due time changed (``retimed``, in the order of the changes, for
the driver to re-arm its timers). Nothing else writes these.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt

from gpumosaic.errors import BookkeepingError
from gpumosaic.mechanisms.gandiva.actions import Action, Migrate, MoveReason
from gpumosaic.mechanisms.gandiva.affinity import ServerView
from gpumosaic.mechanisms.gandiva.config import GandivaConfig
from gpumosaic.mechanisms.gandiva.group import GpuGroup, Meter
from gpumosaic.mechanisms.gandiva.observations import RateBook
from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.state import Assignment, ClusterState

# Pseudo job ids that hold a server's GPUs while it is away: -(2**61) - node (far from
# the sets' -(gid + 1) and from placement/gang.py's pieces, -(2**62) - i).
_AWAY_BASE = -(2**61)


def holder_id(gid: int) -> int:
    """The pseudo job id under which ClusterState holds GPU set ``gid``."""
    return -(gid + 1)


class GpuSets:
    """Every GPU set of a Gandiva run, the servers' affinities and the held GPU-seconds."""

    def __init__(
        self,
        cluster: ClusterSpec,
        config: GandivaConfig,
        meter: Meter,
        rate_book: RateBook,
        actions: list[Action],
        order: Sequence[int],
    ) -> None:
        self.cluster = cluster
        self.state = ClusterState(cluster)
        # Seeded server order: ties between equally good servers follow it.
        self.order = tuple(order)
        self.held_gpu_s = 0.0
        self._config = config
        self._meter = meter
        self._rate_book = rate_book
        self._actions = actions
        # Sets whose next due time may have changed, in the order of the changes.
        self.retimed: list[int] = []
        self._groups: dict[int, GpuGroup] = {}
        self._on_node: list[set[int]] = [set() for _ in cluster.nodes]
        self._affinity = [0] * len(cluster.nodes)
        self._held_since = 0.0
        self._next_gid = 0
        self.away_milli = 0  # GPUs of servers that left (``hold_away``)

    # --- reading ----------------------------------------------------------------------

    def __getitem__(self, gid: int) -> GpuGroup:
        return self._groups[gid]

    def __iter__(self) -> Iterator[GpuGroup]:
        return iter(self._groups.values())

    def __len__(self) -> int:
        return len(self._groups)

    def free_counts(self) -> npt.NDArray[np.intp]:
        """Fully free GPUs per server."""
        state = self.state
        counts: npt.NDArray[np.intp] = (state.gpu_exists & (state.gpu_free == MILLI_PER_GPU)).sum(
            axis=1
        )
        return counts

    def views(self, k: int, allowed: npt.NDArray[np.bool_]) -> list[ServerView]:
        """What the affinity order needs to know of every allowed server with >= k GPUs,
        in the seeded server order."""
        free = self.free_counts()
        views: list[ServerView] = []
        for node in self.order:
            num = int(self.state.num_gpus[node])
            if not allowed[node] or num < k:
                continue
            gids = self._on_node[node]
            jobs = sum(self._groups[g].num_jobs for g in gids)
            # Sharing is bounded in resident jobs, so a packed pair counts as two.
            # A gang is its job's alone: never shared.
            shared = [
                (self._groups[g].num_jobs, g)
                for g in gids
                if self._groups[g].k == k and not self._groups[g].more
            ]
            resident, gid = min(shared) if shared else (0, -1)
            views.append(
                ServerView(
                    node, self._affinity[node], num, int(free[node]), jobs / num, gid, resident
                )
            )
        return views

    def running_jobs(self, now: float) -> int:
        """Jobs whose unit holds the GPUs now (not in a hand-over or migration)."""
        return sum(len(g.units[0].jobs) for g in self._groups.values() if now >= g.paused_until)

    # --- changes ----------------------------------------------------------------------

    def open(self, node: int, k: int, now: float) -> GpuGroup:
        """Hold k fully free GPUs of ``node`` (the lowest-index ones) as a new set."""
        gid = self._next_gid
        self._next_gid += 1
        gpus = self._free_gpus(node, k)
        self.advance_held(now)
        self.state.allocate(Assignment(holder_id(gid), node, gpus, MILLI_PER_GPU, 0, 0))
        self._attach(gid, node, k)
        model = self.cluster.nodes[node].gpu
        group = GpuGroup(
            gid, node, gpus, model, self._config, self._meter, self._rate_book, self._actions, now
        )
        self._groups[gid] = group
        return group

    def open_gang(self, parts: tuple[tuple[int, tuple[int, ...]], ...], now: float) -> GpuGroup:
        """Hold fully free GPUs of several servers (one model) as one new set, a gang."""
        gid = self._next_gid
        self._next_gid += 1
        holder = holder_id(gid)
        self.advance_held(now)
        self.state.allocate_gang(
            tuple(Assignment(holder, node, gpus, MILLI_PER_GPU, 0, 0) for node, gpus in parts)
        )
        k = sum(len(gpus) for _, gpus in parts)
        for node, _ in parts:
            self._attach(gid, node, k)
        (node, gpus), *more = parts
        model = self.cluster.nodes[node].gpu
        group = GpuGroup(
            gid,
            node,
            gpus,
            model,
            self._config,
            self._meter,
            self._rate_book,
            self._actions,
            now,
            more=tuple(more),
        )
        self._groups[gid] = group
        return group

    def close(self, group: GpuGroup, now: float) -> None:
        """Give an empty set's GPUs back."""
        self.retimed.append(group.gid)
        self.advance_held(now)
        if group.more:
            self.state.release_gang(holder_id(group.gid))
        else:
            self.state.release(holder_id(group.gid))
        del self._groups[group.gid]
        for node, _ in group.parts:
            self._detach(group.gid, node)

    def relocate(self, group: GpuGroup, dest_node: int, now: float) -> int:
        """Move a whole set, with every job in it, to another server (a migration for each
        of its jobs, which lose ``migration_cost_s``); returns the jobs moved."""
        if group.more:
            raise BookkeepingError(f"group {group.gid} spans servers: it is never moved")
        config = self._config
        source = group.node
        self.advance_held(now)
        self.state.release(holder_id(group.gid))
        self._detach(group.gid, group.node)
        gpus = self._free_gpus(dest_node, group.k)
        self.state.allocate(Assignment(holder_id(group.gid), dest_node, gpus, MILLI_PER_GPU, 0, 0))
        self._attach(group.gid, dest_node, group.k)
        group.node, group.gpus = dest_node, gpus
        group.paused_until = max(group.paused_until, now + config.migration_cost_s)
        group.slice_end = max(group.slice_end, group.paused_until + config.quantum_s)
        moved = 0
        for job in group.jobs():
            job.migrations += 1
            moved += 1
            self._actions.append(
                Migrate(job.id, source, dest_node, gpus, MoveReason.DEFRAGMENT, group.paused_until)
            )
        self.replan(group)
        return moved

    def hold_away(self, node: int) -> None:
        """A server left (live: its Ray node is lost): its GPUs are held so that nothing
        is placed there (its sets are closed first) and count as neither free nor held."""
        count = int(self.state.num_gpus[node])
        self.state.allocate(
            Assignment(_AWAY_BASE - node, node, tuple(range(count)), MILLI_PER_GPU, 0, 0)
        )
        self.away_milli += count * MILLI_PER_GPU

    def release_away(self, node: int) -> None:
        """A server that left came back: its GPUs are free again."""
        a = self.state.release(_AWAY_BASE - node)
        self.away_milli -= len(a.gpus) * MILLI_PER_GPU

    def on_node(self, node: int) -> list[GpuGroup]:
        """The sets that hold GPUs of ``node`` (a gang's included)."""
        return [self._groups[g] for g in sorted(self._on_node[node])]

    def record(self, action: Action) -> None:
        """Log an action decided outside the sets (a move between them)."""
        self._actions.append(action)

    def replan(self, group: GpuGroup) -> None:
        """The set's next event (a finish, a trial verdict or a quantum end) may have
        moved: the driver re-arms its timer for it after this call."""
        self.retimed.append(group.gid)

    def take_retimed(self) -> tuple[int, ...]:
        """The sets to re-arm, each once, in the order of their last change."""
        retimed = self.retimed
        if len(retimed) == 1:
            order: tuple[int, ...] = (retimed[0],)
        else:
            order = tuple(dict.fromkeys(reversed(retimed)))[::-1]
        retimed.clear()
        return order

    def get(self, gid: int) -> GpuGroup | None:
        return self._groups.get(gid)

    def settle_all(self, now: float) -> None:
        """Bring every set's progress and the held GPU-seconds up to ``now``."""
        for group in self._groups.values():
            group.settle(now)
        self.advance_held(now)

    def advance_held(self, now: float) -> None:
        held = (self.state.allocated_gpu_milli - self.away_milli) / MILLI_PER_GPU
        self.held_gpu_s += held * (now - self._held_since)
        self._held_since = now

    def check(self) -> int:
        """ClusterState and the sets agree; returns the number of jobs in sets (the
        driver checks their progress)."""
        self.state.check_invariants()
        placed = 0
        for gid, group in self._groups.items():
            if group.more:
                held = tuple((a.node, a.gpus) for a in self.state.gangs.get(holder_id(gid), ()))
            else:
                a = self.state.assignments.get(holder_id(gid))
                held = () if a is None else ((a.node, a.gpus),)
            if held != group.parts or not group.units:
                raise BookkeepingError(f"group {gid} disagrees with ClusterState")
            for node, _ in group.parts:
                if gid not in self._on_node[node]:
                    raise BookkeepingError(f"group {gid} is not listed on node {node}")
            for job in group.jobs():
                placed += 1
                if job.group != gid or job.finished:
                    raise BookkeepingError(f"job {job.spec.id} misplaced in group {gid}")
        return placed

    # --- internals --------------------------------------------------------------------

    def _free_gpus(self, node: int, k: int) -> tuple[int, ...]:
        free = np.flatnonzero(
            self.state.gpu_exists[node] & (self.state.gpu_free[node] == MILLI_PER_GPU)
        )
        if len(free) < k:
            raise BookkeepingError(f"node {node} has {len(free)} free GPUs, needs {k}")
        return tuple(int(g) for g in free[:k])

    def _attach(self, gid: int, node: int, k: int) -> None:
        if not self._on_node[node]:
            self._affinity[node] = k
        self._on_node[node].add(gid)

    def _detach(self, gid: int, node: int) -> None:
        self._on_node[node].discard(gid)
        if not self._on_node[node]:
            self._affinity[node] = 0
