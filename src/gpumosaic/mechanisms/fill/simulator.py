"""The "fill the cluster" replay of FGD/PWR (shared/reference/fgd_openb.md).

Shuffle the task list with the seed, append tasks sampled with replacement until the GPU
requested by all tasks reaches ``inflate`` x the cluster's GPUs (the task that crosses the
target is the last one; a list that already exceeds it is cut the same way), then place
the tasks one by one. Tasks never depart; a task that cannot be placed fails at once with
the filter's reason (no queue, no retry). After every task record the arrived workload,
the GPU allocation rate, FGD's fragmentation (rate and amount) and the cluster power.

The target workload M of FGD comes from the task list before inflation. While the tasks
are placed, only the allocations are logged; the fragmentation and power curves come from
one compiled replay of that log at the end, the event simulator's timeline replay
(``sim.timeline``), so both figure the cluster with the same code.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement.base import PlacementStrategy
from gpumosaic.placement.filter import FilterKey, Reason, explain, filter_key
from gpumosaic.placement.workload import TargetWorkload
from gpumosaic.results.timeline.log import TimelineLog

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
        failed: npt.NDArray[np.bool_] = self.fail_reason != PLACED
        return failed

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
    """What the replay keeps per task while it runs: which task each placement was and
    the GPU milli each task took. The cluster's figures after every placement come from
    the allocation log (``sim.timeline.log.TimelineLog``, the event simulator's), replayed
    once at the end."""

    def __init__(self, state: ClusterState, workload: TargetWorkload, num_tasks: int) -> None:
        self.log = TimelineLog(state, workload)
        self.placed = 0
        self.allocated_milli = 0
        self.step = np.zeros(num_tasks, dtype=np.intp)  # task index of placement k
        self.milli = np.zeros(num_tasks, dtype=np.int64)  # GPU milli allocated by task i
        self.log.sample(-1.0, 0, 0, 0)  # the cluster before the first task

    def add(self, i: int, placed: Assignment) -> None:
        k = self.placed
        milli = placed.gpu_milli * len(placed.gpus)
        self.step[k], self.milli[i] = i, milli
        self.placed = k + 1
        self.allocated_milli += milli
        self.log.allocated((placed,))
        self.log.sample(float(i), self.allocated_milli, k + 1, 0)


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
    strategy: PlacementStrategy,
    workload: TargetWorkload,
    rng: np.random.Generator,
    seed: int,
    inflate: float = 1.3,
    progress: Callable[[float], None] | None = None,
    on_task: Callable[[int, JobSpec, Assignment | None], None] | None = None,
) -> FillResult:
    """One fill replay with built objects (``run.fill.fill_replay`` builds them from names):
    ``strategy`` scoring against ``workload`` (the target workload of the task list),
    ``rng`` the run's Generator seeded from ``seed`` (the order, then the placement's
    draws); deterministic for a given (nodes, tasks, placement, seed, inflate).

    ``on_task(i, task, assignment)`` sees every task of the replay (i: its index, the id
    it is placed under) and where it went (None: it failed), for stores that keep
    per-task placements."""
    start, start_cpu = time.perf_counter(), time.process_time()
    if inflate <= 0:
        raise ValueError(f"inflate must be > 0, got {inflate}")
    state = ClusterState(nodes)
    capacity = state.total_gpu_milli
    order = fill_order(tasks, capacity, inflate, rng)
    n = len(order)
    demand = np.array([t.total_gpu_milli for t in tasks], dtype=np.int64)
    kinds = np.array([task_kind(t) for t in tasks], dtype=np.int8)
    arrived = np.cumsum(demand[order]).astype(np.float64)
    kind = kinds[order]
    reason = np.full(n, PLACED, dtype=np.int8)
    record = _FillRecord(state, workload, n)
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
            record.add(i, placed)
        if on_task is not None:
            on_task(i, job, placed)
        if progress is not None and i % report_every == 0:
            progress(i / n)
    allocated = np.cumsum(record.milli).astype(np.float64)
    figures = record.log.figures()
    frag_milli = _per_task(record, figures.fragmentation_milli, n)
    power_gpu = _per_task(record, figures.power_gpu_w, n)
    power_cpu = _per_task(record, figures.power_cpu_w, n)
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


def on_grid(result: FillResult, grid_pct: npt.NDArray[np.float64]) -> npt.NDArray[np.intp]:
    """Index of the point reached at each arrived-% of ``grid_pct`` (first at or past it)."""
    idx = np.searchsorted(result.arrived_pct, grid_pct, side="left")
    return np.minimum(idx, result.num_tasks - 1).astype(np.intp)
