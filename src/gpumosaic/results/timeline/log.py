"""A run's timeline, with its cluster figures worked out once, at the end.

The event simulator takes a sample after every scheduling pass (~100,000 in the openb
replay); the fill replay one after every placement (``figures`` gives it the cluster's
F total and watts per sample, with no rates). While the
run goes on, a sample records only what the driver has at hand -- time, allocated milli,
running and queued jobs -- and how long the log of allocations and releases was then
(``allocated``/``released``: one integer per part). ``freeze`` replays that log once
(``kernel.replay_samples``, compiled) on copies of the starting state and gives
every sample the figures of the cluster as it was: the fragmentation rate (FGD's F of the
nodes each sample touched, re-counted by the function the FGD scorer and the shared
``FragmentationTracker`` use, summed in numpy's order, over the free milli) and the power
(``PowerTracker.watts`` of each touched node; the totals are kept by difference, exact
because every GPU model draws whole watts). The figures are those the state gave at each
sample, bit for bit, and the run itself never pays for them sample by sample.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpumosaic.model.power import PowerTracker
from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement.fragmentation import ClassArrays
from gpumosaic.placement.workload import TargetWorkload
from gpumosaic.results.result import Timeline


@dataclass(frozen=True, slots=True)
class ClusterFigures:
    """Per sample of a ``TimelineLog``: the cluster's summed FGD F in milli (0 without a
    target workload), and its GPU and CPU watts."""

    fragmentation_milli: npt.NDArray[np.float64]
    power_gpu_w: npt.NDArray[np.float64]
    power_cpu_w: npt.NDArray[np.float64]


class TimelineLog:
    """Samples and the allocation log of one run on ``state`` (from its current contents:
    background load included)."""

    def __init__(self, state: ClusterState, workload: TargetWorkload | None) -> None:
        self.state = state
        self.workload = workload
        self._gpu_free = state.gpu_free.copy()
        self._cpu_free = state.cpu_free.copy()
        self._power = PowerTracker(state)
        self._capacity = state.total_gpu_milli
        # Parts logged so far, as columns (node, milli per GPU, milli-CPU, first slot in
        # ``_slots``), and their GPU slots one after another.
        self._part_node = array("q")
        self._part_milli = array("q")
        self._part_cpu = array("q")
        self._part_slot_at = array("q")
        self._slots = array("q")
        # +p + 1: part p allocated; -(p + 1): released.
        self._log = array("q")
        self._time = array("d")
        self._allocated = array("q")
        self._running = array("q")
        self._queued = array("q")
        self._ends = array("q")

    def __len__(self) -> int:
        return len(self._time)

    def allocated(self, parts: Sequence[Assignment]) -> int:
        """Log ``parts`` (one job's, just allocated); returns the id of the first part
        (``released`` takes it back)."""
        first = len(self._part_node)
        slots = self._slots
        for part in parts:
            self._part_node.append(part.node)
            self._part_milli.append(part.gpu_milli)
            self._part_cpu.append(part.cpu_milli)
            self._part_slot_at.append(len(slots))
            slots.extend(part.gpus)
        if len(parts) == 1:
            self._log.append(first + 1)
        else:
            self._log.extend(range(first + 1, first + len(parts) + 1))
        return first

    def released(self, first: int, count: int) -> None:
        """Log the release of the ``count`` parts logged from ``first`` on."""
        if count == 1:
            self._log.append(-first - 1)
        else:
            self._log.extend(range(-first - 1, -first - count - 1, -1))

    def sample(self, time_s: float, allocated_milli: int, running: int, queued: int) -> None:
        """A sample of the cluster now; several at one instant keep the last."""
        times = self._time
        if times and times[-1] == time_s:
            self._allocated[-1] = allocated_milli
            self._running[-1] = running
            self._queued[-1] = queued
            self._ends[-1] = len(self._log)
            return
        times.append(time_s)
        self._allocated.append(allocated_milli)
        self._running.append(running)
        self._queued.append(queued)
        self._ends.append(len(self._log))

    def freeze(self) -> Timeline:
        """The timeline, every sample with the cluster's figures as they were then."""
        samples = len(self._time)
        allocated = np.array(self._allocated, dtype=np.int64)
        figures = self.figures()
        if self.workload is None:
            rate = np.full(samples, np.nan)
        else:
            free = self._capacity - allocated
            rate = np.zeros(samples)
            np.divide(figures.fragmentation_milli, free, out=rate, where=free > 0)
        return Timeline(
            time_s=np.array(self._time, dtype=np.float64),
            allocated_milli=allocated.astype(np.float64),
            running=np.array(self._running, dtype=np.int64),
            queued=np.array(self._queued, dtype=np.int64),
            fragmentation_rate=rate,
            power_gpu_w=figures.power_gpu_w,
            power_cpu_w=figures.power_cpu_w,
        )

    def figures(self) -> ClusterFigures:
        """The cluster's figures at every sample, from one replay of the log."""
        frag_total, changed = self._replay()
        sample, node, busy, cpu_free = changed
        gpu_w, cpu_w = self._power_totals(sample, node, busy, cpu_free, len(self._time))
        return ClusterFigures(frag_total, gpu_w, cpu_w)

    def _replay(self) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
        from gpumosaic.results.timeline.kernel import replay_samples

        slot_at = np.empty(len(self._part_slot_at) + 1, dtype=np.int64)
        slot_at[:-1] = self._part_slot_at
        slot_at[-1] = len(self._slots)
        log = np.array(self._log, dtype=np.int64)
        ends = np.array(self._ends, dtype=np.int64)
        samples, entries = len(ends), len(log)
        if self.workload is None:
            with_frag = False
            class_ok = np.zeros((self.state.num_nodes, 0), dtype=np.bool_)
            c_cpu = c_num_gpu = np.zeros(0, dtype=np.int64)
            weight = np.zeros(0)
            fit_table = below_table = np.zeros((1001, 0), dtype=np.int64)
        else:
            c = ClassArrays.build(self.state, self.workload)
            with_frag = True
            class_ok, c_cpu, c_num_gpu, weight = c.class_ok, c.cpu, c.num_gpu, c.weight
            fit_table, below_table = c.fit_table, c.below_table
        frag_total = np.zeros(samples)
        changed = tuple(np.empty(entries, dtype=np.int64) for _ in range(4))
        written = replay_samples(
            self._gpu_free.copy(), self._cpu_free.copy(), self.state.num_gpus.astype(np.int64),
            np.array(self._part_node, dtype=np.int64),
            np.array(self._part_milli, dtype=np.int64),
            np.array(self._part_cpu, dtype=np.int64),
            slot_at, np.array(self._slots, dtype=np.int64), log, ends, with_frag, class_ok,
            c_cpu, c_num_gpu, weight, fit_table, below_table, frag_total, *changed,
        )  # fmt: skip
        return frag_total, tuple(column[:written] for column in changed)

    def _power_totals(
        self,
        sample: np.ndarray,
        node: np.ndarray,
        busy: np.ndarray,
        cpu_free: np.ndarray,
        samples: int,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Cluster GPU and CPU watts per sample: the starting totals plus, per sample, the
        change of every node it touched from that node's previous figure (whole watts:
        exact in any order)."""
        power = self._power
        gpu_w, cpu_w = power.watts(node, busy, self.state.cpu_capacity[node] - cpu_free)
        start_gpu, start_cpu = power.totals
        # The previous figure of each entry's node: its last entry before, else the start.
        order = np.argsort(node, kind="stable")
        first = np.ones(len(order), dtype=bool)
        first[1:] = node[order][1:] != node[order][:-1]
        out = []
        for now, start_nodes in ((gpu_w, power.node_gpu_w), (cpu_w, power.node_cpu_w)):
            ordered = now[order]
            before = np.empty_like(ordered)
            before[1:] = ordered[:-1]
            before[first] = start_nodes[node[order][first]]
            delta = np.empty_like(ordered)
            delta[order] = ordered - before
            per_sample = np.bincount(sample, weights=delta, minlength=samples)
            out.append(np.cumsum(per_sample))
        return start_gpu + out[0], start_cpu + out[1]
