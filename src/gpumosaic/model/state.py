"""ClusterState: the one owner of who holds which GPU share, CPU and memory.

Everything lives in numpy arrays indexed by node (and GPU slot) so that a placement can
score every node in one vectorized pass. Nodes with fewer GPUs than the widest node have
padding slots: ``gpu_exists`` is False there and their free milli is 0, so they never fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpumosaic.errors import BookkeepingError
from gpumosaic.model import bulk
from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.holders import RowHolders
from gpumosaic.model.job import JobSpec
from gpumosaic.types import IntArray

# Columns of ``kind_count``: 0 counts fractional ("sharing") tasks, k counts k-GPU tasks.
SHARING_KIND = 0


@dataclass(frozen=True, slots=True)
class Assignment:
    """Where a job runs: one node, the GPU slots it uses there and what it holds."""

    job_id: int
    node: int
    gpus: tuple[int, ...]
    gpu_milli: int
    cpu_milli: int
    memory_mib: int

    @classmethod
    def of(cls, job: JobSpec, node: int, gpus: tuple[int, ...]) -> Assignment:
        """``job`` on ``node``'s GPU slots ``gpus``, holding what it asks for (a CPU-only
        job holds no GPU milli)."""
        return cls(
            job_id=job.id,
            node=node,
            gpus=gpus,
            gpu_milli=job.gpu_milli if job.num_gpu else 0,
            cpu_milli=job.cpu_milli,
            memory_mib=job.memory_mib,
        )

    @property
    def kind(self) -> int:
        """GpuClustering's task kind: 0 = sharing (fractional), k = k whole GPUs."""
        if len(self.gpus) == 1 and self.gpu_milli < MILLI_PER_GPU:
            return SHARING_KIND
        return len(self.gpus)


class ClusterState:
    """Free resources per node and GPU, and the assignment of every running job."""

    def __init__(self, spec: ClusterSpec) -> None:
        self.spec = spec
        nodes = spec.nodes
        n = len(nodes)
        width = max((nd.num_gpus for nd in nodes), default=0)
        self.model_names: tuple[str, ...] = tuple(m.name for m in spec.gpu_models)
        index = {name: i for i, name in enumerate(self.model_names)}
        self.node_model = np.array([index[nd.gpu.name] for nd in nodes], dtype=np.int16)
        self.num_gpus = np.array([nd.num_gpus for nd in nodes], dtype=np.int32)
        self.gpu_exists = np.arange(width)[None, :] < self.num_gpus[:, None]
        self.gpu_capacity = np.where(self.gpu_exists, MILLI_PER_GPU, 0).astype(np.int32)
        self.gpu_free = self.gpu_capacity.copy()
        self.cpu_capacity = np.array([nd.cpu_milli for nd in nodes], dtype=np.int64)
        self.cpu_free = self.cpu_capacity.copy()
        self.memory_capacity = np.array([nd.memory_mib for nd in nodes], dtype=np.int64)
        self.memory_free = self.memory_capacity.copy()
        # Tasks per GPU slot and per node and kind: the power model and GpuClustering need them.
        self.gpu_tasks = np.zeros((n, width), dtype=np.int32)
        self.kind_count = np.zeros((n, width + 1), dtype=np.int32)
        # Bumped on every change to a node, so callers can keep per-node caches.
        self.node_version = np.zeros(n, dtype=np.int64)
        self.assignments: dict[int, Assignment] = {}
        # Jobs whose GPUs span several nodes (Gavel's one-GPU servers): one part per node.
        self.gangs: dict[int, tuple[Assignment, ...]] = {}
        # Jobs placed in bulk, as rows of arrays (``holders``); never also in the two above.
        self.rows = RowHolders(width)
        self._model_mask_cache: dict[frozenset[str] | None, npt.NDArray[np.bool_]] = {}
        self._fits_empty: dict[tuple[int, int, int, int, frozenset[str] | None], bool] = {}
        self._allocated_milli = 0
        # Counts releases: while it stays put, free resources only shrink, so a job that
        # found no node still finds none (callers skip re-trying it).
        self.releases = 0

    @property
    def num_nodes(self) -> int:
        return len(self.num_gpus)

    @property
    def total_gpu_milli(self) -> int:
        return int(self.gpu_capacity.sum())

    @property
    def allocated_gpu_milli(self) -> int:
        return self._allocated_milli

    def model_mask(self, allowed: frozenset[str] | None) -> npt.NDArray[np.bool_]:
        """Nodes whose GPU model the job allows (cached per distinct constraint)."""
        mask = self._model_mask_cache.get(allowed)
        if mask is None:
            if allowed is None:
                mask = np.ones(self.num_nodes, dtype=bool)
            else:
                ok = np.array([m.upper() in allowed for m in self.model_names], dtype=bool)
                mask = ok[self.node_model] if len(ok) else np.zeros(self.num_nodes, bool)
            mask.setflags(write=False)
            self._model_mask_cache[allowed] = mask
        return mask

    def allocate(self, assignment: Assignment) -> None:
        # Scalar indexing per GPU: assignments hold a handful of GPUs, and numpy's fancy
        # indexing costs microseconds per call on the simulators' hottest path.
        a = assignment
        node = a.node
        if a.job_id in self.assignments or self.rows.holds(a.job_id):
            raise BookkeepingError(f"job {a.job_id} is already placed")
        if len(set(a.gpus)) != len(a.gpus):
            raise BookkeepingError(f"job {a.job_id}: a GPU slot is listed twice")
        free = self.gpu_free[node]
        exists = self.gpu_exists[node]
        width = len(free)
        for g in a.gpus:
            if not 0 <= g < width or not exists[g]:
                raise BookkeepingError(f"job {a.job_id}: node {node} has no GPU slot {a.gpus}")
            if free[g] < a.gpu_milli:
                raise BookkeepingError(f"job {a.job_id}: GPU share over 1000 milli on node {node}")
        if self.cpu_free[node] < a.cpu_milli or self.memory_free[node] < a.memory_mib:
            raise BookkeepingError(f"job {a.job_id}: CPU or memory over capacity on {node}")
        tasks = self.gpu_tasks[node]
        for g in a.gpus:
            free[g] -= a.gpu_milli
            tasks[g] += 1
        self._allocated_milli += a.gpu_milli * len(a.gpus)
        self.cpu_free[node] -= a.cpu_milli
        self.memory_free[node] -= a.memory_mib
        if a.gpus:
            self.kind_count[node, a.kind] += 1
        self.node_version[node] += 1
        self.assignments[a.job_id] = a

    def adopt(self, assignments: Sequence[Assignment]) -> None:
        """Record assignments whose resources a compiled placement step already took from
        the arrays (``placement.kernel.place_run`` allocates exactly as ``allocate`` does:
        GPU milli and tasks per slot, CPU, memory, the kind count, the node version)."""
        new = {a.job_id: a for a in assignments}
        # dict_keys.isdisjoint iterates over its argument: the new ones, not all held.
        if len(new) != len(assignments) or not self.assignments.keys().isdisjoint(new):
            raise BookkeepingError("a job is listed twice or already placed")
        if self.rows.held and self.rows.held_mask(np.fromiter(new, dtype=np.int64)).any():
            raise BookkeepingError("a job is already placed")
        self.assignments.update(new)
        self._allocated_milli += sum(a.gpu_milli * len(a.gpus) for a in assignments)

    def adopt_gangs(self, gangs: Sequence[tuple[Assignment, ...]]) -> None:
        """``adopt`` for gangs: record gangs whose resources a compiled step already took
        (``mechanisms.rounds.kernel.place_symmetric``)."""
        if not gangs:
            return
        ids = [parts[0].job_id for parts in gangs]
        if (
            len(set(ids)) != len(ids)
            or not self.gangs.keys().isdisjoint(ids)
            or not self.assignments.keys().isdisjoint(ids)
            or (self.rows.held and self.rows.held_mask(np.array(ids, dtype=np.int64)).any())
        ):
            raise BookkeepingError("a gang is listed twice or its job is already placed")
        self.gangs.update(zip(ids, gangs, strict=True))
        self._allocated_milli += sum(p.gpu_milli * len(p.gpus) for g in gangs for p in g)

    def allocate_gang(self, parts: tuple[Assignment, ...]) -> None:
        """Place one job on several nodes at once (all parts carry the job's id).

        All-or-nothing: if any part does not fit, nothing is allocated.
        """
        if not parts:
            raise BookkeepingError("a gang needs at least one part")
        job_id = parts[0].job_id
        if job_id in self.gangs or job_id in self.assignments or self.rows.holds(job_id):
            raise BookkeepingError(f"job {job_id} is already placed")
        if any(p.job_id != job_id for p in parts) or len({p.node for p in parts}) != len(parts):
            raise BookkeepingError(f"job {job_id}: gang parts must be one per node, same job")
        done: list[Assignment] = []
        try:
            for part in parts:
                self.allocate(part)
                done.append(self.assignments.pop(job_id))
        except BookkeepingError:
            for part in done:
                self.assignments[job_id] = part
                self.release(job_id)
            raise
        self.gangs[job_id] = parts

    def release_gang(self, job_id: int) -> tuple[Assignment, ...]:
        parts = self.gangs.pop(job_id, None)
        if parts is None:
            raise BookkeepingError(f"job {job_id} holds no gang to release")
        for part in parts:
            self.assignments[job_id] = part
            self.release(job_id)
        return parts

    def holds(self, job_id: int) -> bool:
        return job_id in self.assignments or job_id in self.gangs or self.rows.holds(job_id)

    def holder_ids(self) -> list[int]:
        """Every job that holds resources (assignments, gangs, then rows)."""
        rows = np.flatnonzero(self.rows.node >= 0).tolist()
        return [*self.assignments, *self.gangs, *rows]

    def parts_of(self, job_id: int) -> tuple[Assignment, ...]:
        """Where ``job_id`` holds resources: one part per node (several: a gang)."""
        gang = self.gangs.get(job_id)
        if gang is not None:
            return gang
        a = self.assignments.get(job_id)
        if a is not None:
            return (a,)
        rows = self.rows
        if not rows.holds(job_id):
            raise BookkeepingError(f"job {job_id} holds nothing")
        slots = tuple(rows.slots[job_id, : rows.count[job_id]].tolist())
        return (
            Assignment(
                job_id,
                int(rows.node[job_id]),
                slots,
                int(rows.milli[job_id]),
                int(rows.cpu[job_id]),
                int(rows.memory[job_id]),
            ),
        )

    def release(self, job_id: int) -> Assignment:
        a = self.assignments.pop(job_id, None)
        if a is None:
            if self.rows.holds(job_id):
                (a,) = self.parts_of(job_id)
                self.release_many([job_id])
                return a
            raise BookkeepingError(f"job {job_id} holds nothing to release")
        node = a.node
        free = self.gpu_free[node]
        tasks = self.gpu_tasks[node]
        for g in a.gpus:
            free[g] += a.gpu_milli
            tasks[g] -= 1
        self._allocated_milli -= a.gpu_milli * len(a.gpus)
        self.releases += 1
        self.cpu_free[node] += a.cpu_milli
        self.memory_free[node] += a.memory_mib
        if a.gpus:
            self.kind_count[node, a.kind] -= 1
        self.node_version[node] += 1
        return a

    def allocate_many(self, assignments: Sequence[Assignment]) -> None:
        """``allocate`` each of ``assignments`` in one vectorized pass (a round mechanism
        places hundreds at once). Same end state as allocating them one by one; checked as a
        whole before anything changes (all or nothing): no GPU share over 1000 milli, CPU
        and memory within capacity, no job placed twice."""
        if not assignments:
            return
        new = {a.job_id: a for a in assignments}
        if len(new) != len(assignments) or not self.assignments.keys().isdisjoint(new):
            raise BookkeepingError("a job is listed twice or already placed")
        if not self.gangs.keys().isdisjoint(new) or (
            self.rows.held and self.rows.held_mask(np.fromiter(new, dtype=np.int64)).any()
        ):
            raise BookkeepingError("a job of the batch already holds GPUs")
        if any(len(set(a.gpus)) != len(a.gpus) for a in assignments if len(a.gpus) > 1):
            raise BookkeepingError("a GPU slot is listed twice in one assignment")
        self._apply(assignments, -1)
        self.assignments.update(new)

    def allocate_gangs(self, gangs: Sequence[tuple[Assignment, ...]]) -> None:
        """``allocate_gang`` each of ``gangs`` in one vectorized pass (all or nothing)."""
        if not gangs:
            return
        ids = []
        for parts in gangs:
            if not parts:
                raise BookkeepingError("a gang needs at least one part")
            job_id = parts[0].job_id
            if any(p.job_id != job_id for p in parts) or len({p.node for p in parts}) != len(parts):
                raise BookkeepingError(f"job {job_id}: gang parts must be one per node, same job")
            ids.append(job_id)
        if (
            len(set(ids)) != len(ids)
            or not self.gangs.keys().isdisjoint(ids)
            or not self.assignments.keys().isdisjoint(ids)
            or (self.rows.held and self.rows.held_mask(np.array(ids, dtype=np.int64)).any())
        ):
            raise BookkeepingError("a gang is listed twice or its job is already placed")
        flat = [p for parts in gangs for p in parts]
        if any(len(set(a.gpus)) != len(a.gpus) for a in flat if len(a.gpus) > 1):
            raise BookkeepingError("a GPU slot is listed twice in one assignment")
        self._apply(flat, -1)
        self.gangs.update(zip(ids, gangs, strict=True))

    def release_many(self, job_ids: Sequence[int] | IntArray) -> None:
        """``release`` each of ``job_ids`` in one compiled pass (``bulk``); the same end
        state (free resources, tasks, kind counts, node versions, the release counter) as
        releasing them one by one. Ids may be held as assignments or as rows."""
        if not len(job_ids):
            return
        ids = np.asarray(job_ids, dtype=np.int64)
        if not self.assignments:  # all held as rows (or an error)
            self._allocated_milli += bulk.release_rows(self, ids)
            self.releases += len(ids)
            return
        in_rows = self.rows.held_mask(ids)
        if not in_rows.all():
            pop = self.assignments.pop
            try:
                released = [pop(job_id) for job_id in ids[~in_rows].tolist()]
            except KeyError as missing:
                raise BookkeepingError(f"job {missing.args[0]} holds nothing to release") from None
            self._allocated_milli += bulk.apply(self, bulk.part_arrays(released), +1)
        if in_rows.any():
            self._allocated_milli += bulk.release_rows(self, ids[in_rows])
        self.releases += len(ids)

    def rows_written(self, count: int, milli: int) -> None:
        """A compiled step took resources and wrote ``count`` holders into ``rows`` itself
        (``mechanisms.rounds.kernel.place_symmetric``), ``milli`` GPU milli in all."""
        self.rows.held += count
        self._allocated_milli += milli

    def rows_released(self, count: int, milli: int) -> None:
        """A compiled step gave back what ``count`` row holders held and forgot them itself
        (``bulk_kernel.release_rows``, called by ``mechanisms.rounds.kernel
        .start_singles``); ``milli`` is the change of allocated milli (<= 0)."""
        self.rows.held -= count
        self._allocated_milli += milli
        self.releases += count

    def allocate_rows(
        self,
        job_ids: IntArray,
        nodes: IntArray,
        slots: IntArray,
        milli: IntArray | int,
        cpu: IntArray | int,
        memory: IntArray | int,
    ) -> None:
        """``allocate`` jobs of one GPU count from arrays (as ``adopt_rows`` reads them), in
        one compiled pass, all or nothing; they are kept as rows."""
        n, k = slots.shape
        first = np.arange(0, (n + 1) * k, k, dtype=np.int64) if k else np.zeros(n + 1, np.int64)
        milli_of, cpu_of, memory_of = (_per_job(v, n) for v in (milli, cpu, memory))
        parts = (
            np.asarray(nodes, dtype=np.int64),
            first,
            slots.ravel(),
            milli_of,
            cpu_of,
            memory_of,
        )
        delta = bulk.apply(self, parts, -1)
        try:
            self.adopt_rows(job_ids, nodes, slots, milli_of, cpu_of, memory_of)
        except BookkeepingError:
            bulk.apply(self, parts, +1)
            raise
        assert delta == int(milli_of.sum()) * k

    def adopt_rows(
        self,
        job_ids: IntArray,
        nodes: IntArray,
        slots: IntArray,
        milli: IntArray | int,
        cpu: IntArray | int,
        memory: IntArray | int,
    ) -> None:
        """Record jobs (ids >= 0) whose resources a compiled step already took from the
        arrays, from its result arrays: per job its node, GPU slots (one row each), milli
        per GPU, CPU and memory (one value each, or one for all). Kept as rows of arrays
        (``holders``), not as ``Assignment`` objects."""
        ids = np.asarray(job_ids, dtype=np.int64)
        if self.assignments or self.gangs:  # (isdisjoint walks the whole list even then)
            listed = ids.tolist()
            if not self.assignments.keys().isdisjoint(listed) or not self.gangs.keys().isdisjoint(
                listed
            ):
                raise BookkeepingError("a job of the batch is already placed")
        n = len(ids)
        milli_of, cpu_of, memory_of = (_per_job(v, n) for v in (milli, cpu, memory))
        if not self.rows.add(ids, nodes, slots, milli_of, cpu_of, memory_of):
            raise BookkeepingError("a job of the batch is listed twice, already placed or < 0")
        self._allocated_milli += int(milli_of.sum()) * slots.shape[1]

    def release_gangs(self, job_ids: Sequence[int]) -> None:
        """``release_gang`` each of ``job_ids`` in one vectorized pass."""
        pop = self.gangs.pop
        try:
            gangs = [pop(job_id) for job_id in job_ids]
        except KeyError as missing:
            raise BookkeepingError(f"job {missing.args[0]} holds no gang to release") from None
        parts = [part for gang in gangs for part in gang]
        if parts:
            self._apply(parts, +1)
            self.releases += len(parts)

    def _apply(self, parts: Sequence[Assignment], sign: int) -> None:
        self._allocated_milli += bulk.apply(self, bulk.part_arrays(parts), sign)

    def check_invariants(self) -> None:
        """Raise BookkeepingError if any invariant is broken (used by tests and debug runs)."""
        if (self.gpu_free < 0).any() or (self.gpu_free > self.gpu_capacity).any():
            raise BookkeepingError("a GPU's free milli left 0..1000")
        if (self.cpu_free < 0).any() or (self.cpu_free > self.cpu_capacity).any():
            raise BookkeepingError("CPU over capacity")
        if (self.memory_free < 0).any() or (self.memory_free > self.memory_capacity).any():
            raise BookkeepingError("memory over capacity")
        used = np.zeros_like(self.gpu_free)
        parts = [p for job_id in self.holder_ids() for p in self.parts_of(job_id)]
        for a in parts:
            used[a.node, list(a.gpus)] += a.gpu_milli
        if not np.array_equal(used, self.gpu_capacity - self.gpu_free):
            raise BookkeepingError("GPU bookkeeping disagrees with the assignments")
        if self._allocated_milli != int(used.sum()):
            raise BookkeepingError("the allocated GPU milli counter disagrees with the GPUs")

    def fits_when_empty(self, job: JobSpec) -> bool:
        """Could the job run on some node of an empty cluster? False means never.
        (Capacities never change, so the answer is kept per job shape.)"""
        key = (job.num_gpu, job.gpu_milli, job.cpu_milli, job.memory_mib, job.allowed_models)
        known = self._fits_empty.get(key)
        if known is None:
            known = self._fits_empty[key] = self._fits_when_empty(job)
        return known

    def _fits_when_empty(self, job: JobSpec) -> bool:
        if job.num_gpu == 0:
            ok = (self.cpu_capacity >= job.cpu_milli) & (self.memory_capacity >= job.memory_mib)
            return bool(ok.any())
        ok = (
            self.model_mask(job.allowed_models)
            & (self.cpu_capacity >= job.cpu_milli)
            & (self.memory_capacity >= job.memory_mib)
            & (self.num_gpus >= job.num_gpu)
        )
        return bool(ok.any())


def _per_job(value: IntArray | int, n: int) -> IntArray:
    """One int64 per job: ``value`` itself (an array of n) or n copies of it."""
    if isinstance(value, np.ndarray):
        return np.asarray(value, dtype=np.int64)
    return np.full(n, value, dtype=np.int64)
