"""The "fill the cluster" replay of FGD/PWR (shared/reference/fgd_openb.md).

Shuffle the task list with the seed, append tasks sampled with replacement until the GPU
requested by all tasks reaches ``inflate`` x the cluster's GPUs (the task that crosses the
target is the last one; a list that already exceeds it is cut the same way), then place
the tasks one by one. Tasks never depart; a task that cannot be placed fails at once with
the filter's reason (no queue, no retry). After every task record the arrived workload,
the GPU allocation rate, FGD's fragmentation (rate and amount) and the cluster power.

The target workload M of FGD comes from the task list before inflation. While the tasks
are placed, only what each placement left on its node is recorded; fragmentation and power
curves are computed from that record at the end.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.job import JobSpec
from gpumosaic.model.power import (
    CORES_PER_SOCKET,
    SOCKET_FULL_W,
    SOCKET_IDLE_W,
    VCPU_PER_CORE,
    gpu_power_table,
    node_power_w,
    sockets,
)
from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement.filter import FilterKey, Reason, explain, filter_key
from gpumosaic.placement.fragmentation import FragmentationTracker, shared_tracker
from gpumosaic.placement.registry import build_placement
from gpumosaic.placement.workload import TargetWorkload

FAIL_REASONS: tuple[Reason, ...] = tuple(Reason)
PLACED = -1  # fail_reason code of a placed task
CPU_ONLY_KIND = -1  # task_kind of a task without GPUs; 0 = sharing, k = k whole GPUs


def task_kind(job: JobSpec) -> int:
    """GpuClustering's kinds, plus CPU-only: -1 no GPU, 0 a GPU fraction, k = k GPUs."""
    if job.num_gpu == 0:
        return CPU_ONLY_KIND
    return 0 if job.is_fractional else job.num_gpu


def kind_label(kind: int) -> str:
    return {CPU_ONLY_KIND: "cpu-only", 0: "sharing"}.get(kind, f"{kind}-gpu")


Floats = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class FillPoint:
    """The cluster after some task. Percentages are of the cluster's GPU milli, except
    the fragmentation rate, which is of the free GPU milli (FGD's definition)."""

    arrived_pct: float
    allocation_rate_pct: float
    fragmentation_rate_pct: float
    fragmentation_pct: float
    power_gpu_w: float
    power_cpu_w: float

    @property
    def power_w(self) -> float:
        return self.power_gpu_w + self.power_cpu_w


@dataclass(frozen=True, slots=True)
class FillResult:
    """Per-task curves of one fill run (index i = after the i-th task of the replay)."""

    placement: str
    seed: int
    inflate: float
    cluster_gpu_milli: int
    arrived_pct: Floats
    allocation_rate_pct: Floats
    fragmentation_rate_pct: Floats
    fragmentation_pct: Floats
    power_gpu_w: Floats
    power_cpu_w: Floats
    fail_reason: npt.NDArray[np.int8]  # index into FAIL_REASONS, PLACED (-1) if placed
    task_kind: npt.NDArray[np.int8]  # see task_kind()
    elapsed_s: float  # wall clock
    cpu_s: float  # CPU time of this process (stable when the machine is shared)

    @property
    def num_tasks(self) -> int:
        return len(self.arrived_pct)

    @property
    def failed(self) -> npt.NDArray[np.bool_]:
        return self.fail_reason != PLACED

    @property
    def power_w(self) -> Floats:
        return self.power_gpu_w + self.power_cpu_w

    def point(self, i: int) -> FillPoint:
        return FillPoint(
            float(self.arrived_pct[i]),
            float(self.allocation_rate_pct[i]),
            float(self.fragmentation_rate_pct[i]),
            float(self.fragmentation_pct[i]),
            float(self.power_gpu_w[i]),
            float(self.power_cpu_w[i]),
        )

    @property
    def final(self) -> FillPoint:
        return self.point(self.num_tasks - 1)

    def at_arrived(self, pct: float) -> FillPoint:
        """The cluster once ``pct`` % of its GPUs have arrived: the first point at or past
        ``pct``, or the last point if the replay never got there."""
        i = int(np.searchsorted(self.arrived_pct, pct, side="left"))
        return self.point(min(i, self.num_tasks - 1))

    def failed_by_reason(self) -> tuple[tuple[Reason, int], ...]:
        """Failed tasks per reason, reasons with no failure left out."""
        counts = np.bincount(self.fail_reason[self.failed], minlength=len(FAIL_REASONS))
        return tuple((r, int(c)) for r, c in zip(FAIL_REASONS, counts, strict=True) if c)

    def failed_by_kind(self) -> tuple[tuple[str, int], ...]:
        """Failed tasks per task kind (cpu-only, sharing, 1-gpu, ...), in kind order."""
        kinds, counts = np.unique(self.task_kind[self.failed], return_counts=True)
        return tuple((kind_label(int(k)), int(c)) for k, c in zip(kinds, counts, strict=True))

    def sample_indices(self, step_pct: float = 1.0) -> npt.NDArray[np.intp]:
        """Indices of the first point past every ``step_pct`` of arrived workload, plus
        the last point (for compact curves)."""
        grid = np.arange(step_pct, self.arrived_pct[-1] + step_pct, step_pct)
        idx = np.searchsorted(self.arrived_pct, grid, side="left")
        idx = np.unique(np.append(idx[idx < self.num_tasks], self.num_tasks - 1))
        return idx.astype(np.intp)


class _FillRecord:
    """What the replay needs per task, kept in preallocated arrays while it runs: the
    node each placed task took and that node's free GPU milli and CPU right after. The
    curves (fragmentation, power) are computed from it once, at the end, in a few
    vectorized passes instead of a handful of numpy calls per task."""

    def __init__(self, state: ClusterState, num_tasks: int) -> None:
        self.state = state
        self.placed = 0
        self.step = np.zeros(num_tasks, dtype=np.intp)  # task index of placement k
        self.node = np.zeros(num_tasks, dtype=np.intp)
        self.gpu_free = np.zeros((num_tasks, state.gpu_free.shape[1]), dtype=state.gpu_free.dtype)
        self.cpu_free = np.zeros(num_tasks, dtype=state.cpu_free.dtype)
        self.milli = np.zeros(num_tasks, dtype=np.int64)  # GPU milli allocated by task i

    def add(self, i: int, node: int, milli: int) -> None:
        k = self.placed
        self.step[k], self.node[k], self.milli[i] = i, node, milli
        self.gpu_free[k] = self.state.gpu_free[node]
        self.cpu_free[k] = self.state.cpu_free[node]
        self.placed = k + 1


class _FailureReasons:
    """The filter's reason for each failed task, as ``explain`` gives it.

    Nearly every failure of a fill is "gpu": some node passes the GPU-model, CPU and
    memory filters, but none has the GPUs. Once ``explain`` says so for a job shape, one
    such node is kept as a witness; while that node is untouched (its ``node_version``
    unchanged) it still passes those filters, so the answer is still "gpu" without a scan.
    """

    def __init__(self) -> None:
        self._code = {r: i for i, r in enumerate(FAIL_REASONS)}
        self._witness: dict[FilterKey, tuple[int, int]] = {}  # shape -> (node, version)

    def code(self, state: ClusterState, job: JobSpec) -> int:
        key = filter_key(job)
        witness = self._witness.get(key)
        if witness is not None and state.node_version[witness[0]] == witness[1]:
            return self._code[Reason.GPU]
        reason = explain(state, job).reason
        if reason is Reason.GPU:
            node = _passes_all_but_gpu(state, job)
            self._witness[key] = (node, int(state.node_version[node]))
        return self._code[reason]


def _passes_all_but_gpu(state: ClusterState, job: JobSpec) -> int:
    """A node that passes the filter's GPU-model, CPU and memory tests (``explain`` said
    "gpu", so there is one)."""
    ok = (state.cpu_free >= job.cpu_milli) & (state.memory_free >= job.memory_mib)
    if job.num_gpu:
        ok &= state.model_mask(job.allowed_models)
    return int(np.argmax(ok))


def _node_fragmentation(
    tracker: FragmentationTracker,
    nodes: npt.NDArray[np.intp],
    gpu_free: npt.NDArray[np.integer],
    cpu_free: npt.NDArray[np.integer],
    chunk: int = 2048,
) -> Floats:
    """FGD's F of ``nodes[k]`` in the state (``gpu_free[k]``, ``cpu_free[k]``), through the
    tracker's own tables and ``frag_of`` (the expression of every F), so each value is bit
    for bit what the tracker holds for that node in that state."""
    classes = tracker.classes
    out = np.empty(len(nodes))
    for lo in range(0, len(nodes), chunk):  # bounded memory: (chunk, GPUs, classes) tables
        g = gpu_free[lo : lo + chunk]
        fit = classes.fit_table[g].sum(axis=1)
        below = classes.below_table[g].sum(axis=1)
        free = g.sum(axis=1, dtype=np.int64)
        ok = tracker.node_ok(nodes[lo : lo + chunk], cpu_free[lo : lo + chunk].astype(np.int64))
        out[lo : lo + chunk] = tracker.frag_of(
            ok, fit[:, None, :], below[:, None, :], free[:, None]
        )[:, 0]
    return out


def _fragmentation_curve(
    record: _FillRecord, tracker: FragmentationTracker, initial: Floats, num_tasks: int
) -> Floats:
    """Cluster fragmentation (milli) after every task: the sum of the per-node F vector
    after each placement (the same 1-D sum as ``tracker.total()``), carried over failures."""
    k = record.placed
    values = _node_fragmentation(
        tracker, record.node[:k], record.gpu_free[:k], record.cpu_free[:k]
    ).tolist()
    current = initial.copy()
    totals = np.empty(k + 1)
    totals[0] = current.sum()
    for j, (node, value) in enumerate(zip(record.node[:k].tolist(), values, strict=True)):
        current[node] = value
        totals[j + 1] = current.sum()
    return _per_task(record, totals, num_tasks)


def _power_curves(
    record: _FillRecord, initial: tuple[Floats, Floats], num_tasks: int
) -> tuple[Floats, Floats]:
    """(GPU W, CPU W) of the cluster after every task (model.power's model). The totals
    are carried as the replay always did, one touched node at a time
    (``total += new - old``), so they equal the per-task update bit for bit."""
    state, k = record.state, record.placed
    idle, full = gpu_power_table(state)
    gpus = state.num_gpus.astype(np.int64)
    total_sockets = sockets(state.cpu_capacity)
    gpu0, cpu0 = initial  # per node, before the first task
    nodes = record.node[:k]
    exists = state.gpu_exists[nodes]
    busy = (exists & (record.gpu_free[:k] < MILLI_PER_GPU)).sum(axis=1)
    gpu_w = busy * full[nodes] + (gpus[nodes] - busy) * idle[nodes]
    used = state.cpu_capacity[nodes] - record.cpu_free[:k]
    cores = -(-used // (1000 * VCPU_PER_CORE))
    active = np.minimum(-(-cores // CORES_PER_SOCKET), total_sockets[nodes])
    cpu_w = active * SOCKET_FULL_W + (total_sockets[nodes] - active) * SOCKET_IDLE_W
    curves = []
    for before, new in ((gpu0, gpu_w), (cpu0, cpu_w)):
        old = _previous(nodes, new, before)
        steps = np.concatenate((np.array([float(before.sum())]), new - old))
        curves.append(_per_task(record, np.cumsum(steps), num_tasks))  # sequential sums
    return curves[0], curves[1]


def _previous(nodes: npt.NDArray[np.intp], new: Floats, initial: Floats) -> Floats:
    """For each update ``k`` of ``nodes[k]`` to ``new[k]``: the node's value just before
    (its last update, or ``initial``)."""
    old = initial[nodes]
    by_node = np.argsort(nodes, kind="stable")  # each node's updates, in order
    same = nodes[by_node][1:] == nodes[by_node][:-1]
    old[by_node[1:][same]] = new[by_node[:-1][same]]
    return old


def _per_task(record: _FillRecord, after_placement: Floats, num_tasks: int) -> Floats:
    """``after_placement[j]``: a value after the first j placements (j = 0: none) ->
    the value after every task (a failed task keeps the last placement's)."""
    placed = np.zeros(num_tasks, dtype=np.intp)
    placed[record.step[: record.placed]] = 1
    return after_placement[np.cumsum(placed)]


def fill_order(
    tasks: Sequence[JobSpec], cluster_gpu_milli: int, inflate: float, rng: np.random.Generator
) -> npt.NDArray[np.intp]:
    """Indices into ``tasks`` of the replay: shuffled trace, then samples with replacement,
    stopping at the first task whose cumulative GPU request reaches the target."""
    if not tasks:
        raise ValueError("the task list is empty")
    demand = np.array([t.total_gpu_milli for t in tasks], dtype=np.int64)
    order = rng.permutation(len(tasks))
    target = inflate * cluster_gpu_milli
    if demand.sum() == 0:
        return order.astype(np.intp)  # nothing asks for GPUs: inflation cannot progress
    chunks = [order]
    total = int(demand.sum())
    while total < target:
        extra = rng.integers(0, len(tasks), size=len(tasks))
        chunks.append(extra)
        total += int(demand[extra].sum())
    order = np.concatenate(chunks)
    crossed = np.flatnonzero(np.cumsum(demand[order]) >= target)
    return order[: crossed[0] + 1].astype(np.intp) if len(crossed) else order.astype(np.intp)


def run_fill(
    nodes: ClusterSpec,
    tasks: Sequence[JobSpec],
    placement: str,
    seed: int,
    inflate: float = 1.3,
    progress: Callable[[float], None] | None = None,
    on_task: Callable[[int, JobSpec, Assignment | None], None] | None = None,
) -> FillResult:
    """One fill replay; deterministic for a given (nodes, tasks, placement, seed, inflate).

    ``on_task(i, task, assignment)`` sees every task of the replay (i: its index, the id
    it is placed under) and where it went (None: it failed), for stores that keep
    per-task placements."""
    start, start_cpu = time.perf_counter(), time.process_time()
    if inflate <= 0:
        raise ValueError(f"inflate must be > 0, got {inflate}")
    workload = TargetWorkload.from_jobs(tasks)
    state = ClusterState(nodes)
    capacity = state.total_gpu_milli
    rng = np.random.default_rng(seed)
    order = fill_order(tasks, capacity, inflate, rng)
    strategy = build_placement(placement, workload)
    # The tracker FGD scores with; here only its per-node F of the empty cluster and its
    # tables are read (the curve is computed at the end).
    tracker = shared_tracker(state, workload)
    initial_frag = tracker.frag.copy()
    initial_power = node_power_w(state)

    n = len(order)
    demand = np.array([t.total_gpu_milli for t in tasks], dtype=np.int64)
    kinds = np.array([task_kind(t) for t in tasks], dtype=np.int8)
    arrived = np.cumsum(demand[order]).astype(np.float64)
    kind = kinds[order]
    reason = np.full(n, PLACED, dtype=np.int8)
    record = _FillRecord(state, n)
    failures = _FailureReasons()
    report_every = max(1, n // 100)
    for i, task_index in enumerate(order.tolist()):
        job = tasks[task_index]  # placed under id i: sampled copies need ids of their own
        choice = strategy.choose(state, job, rng)
        placed: Assignment | None = None
        if choice is None:
            reason[i] = failures.code(state, job)
        else:
            node, gpus = choice
            milli = job.gpu_milli if job.num_gpu else 0
            placed = Assignment(i, node, gpus, milli, job.cpu_milli, job.memory_mib)
            state.allocate(placed)
            record.add(i, node, milli * len(gpus))
        if on_task is not None:
            on_task(i, job, placed)
        if progress is not None and i % report_every == 0:
            progress(i / n)
    allocated = np.cumsum(record.milli).astype(np.float64)
    frag_milli = _fragmentation_curve(record, tracker, initial_frag, n)
    power_gpu, power_cpu = _power_curves(record, initial_power, n)
    if progress is not None:
        progress(1.0)
    free_milli = capacity - allocated
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(free_milli > 0, frag_milli / np.maximum(free_milli, 1), 0.0)
    return FillResult(
        placement=strategy.name,
        seed=seed,
        inflate=inflate,
        cluster_gpu_milli=capacity,
        arrived_pct=100.0 * arrived / capacity,
        allocation_rate_pct=100.0 * allocated / capacity,
        fragmentation_rate_pct=100.0 * rate,
        fragmentation_pct=100.0 * frag_milli / capacity,
        power_gpu_w=power_gpu,
        power_cpu_w=power_cpu,
        fail_reason=reason,
        task_kind=kind,
        elapsed_s=time.perf_counter() - start,
        cpu_s=time.process_time() - start_cpu,
    )
