"""The event simulator's timeline: the figures it works out at the end of the run from its
log of allocations and releases (power of the touched nodes by difference, fragmentation
re-counted by the FGD kernel's function) equal the cluster's figures computed from
scratch at every sample."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sim_builders import cluster, job, node, workload

from gpumosaic.mechanisms.event.simulator import EventSimulator
from gpumosaic.model.power import cluster_power_w
from gpumosaic.placement.fragmentation import FragmentationTracker, fragmentation_rate
from gpumosaic.placement.registry import build_placement
from gpumosaic.placement.workload import TargetWorkload
from gpumosaic.policies.ordering import Fifo
from gpumosaic.results.result import Timeline

RNG = np.random.default_rng(0)  # bestfit draws nothing: one Generator serves every run

# A small golden trace that queues: fractional and whole-GPU jobs, one that needs two
# GPUs, departures that free room for the queue, and same-instant arrivals.
JOBS = [
    job(0, arrival=0.0, duration=50, milli=500, cpu=2000),
    job(1, arrival=0.0, duration=30, milli=300, cpu=8000),
    job(2, arrival=5.0, duration=40, num_gpu=2, cpu=4000),
    job(3, arrival=5.0, duration=20, milli=1000, cpu=1000),
    job(4, arrival=12.0, duration=10, milli=700, cpu=30000),
    job(5, arrival=12.0, duration=25, num_gpu=2),
    job(6, arrival=30.0, duration=5, milli=200),
    job(7, arrival=31.0, duration=60, milli=1000, cpu=40000),
]


class CheckedSimulator(EventSimulator):
    """Evaluates the state from scratch at every sample; ``check`` compares the timeline
    (whose figures the simulator works out at the end, from its allocation log)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fresh: list[tuple[float, ...]] = []

    def _record(self) -> None:
        super()._record()
        gpu_w, cpu_w = cluster_power_w(self.state)
        workload = self.timeline.workload
        rate = exact = math.nan
        if workload is not None:
            rate = fragmentation_rate(self.state, workload)
            # The tracker FGD reads, counted afresh: the timeline's figure bit for bit.
            tracker = FragmentationTracker(self.state, workload)
            free = self.state.total_gpu_milli - self.state.allocated_gpu_milli
            exact = tracker.total() / free if free > 0 else 0.0
        allocated = float((self.state.gpu_capacity - self.state.gpu_free).sum())
        running = len(self.state.assignments) + len(self.state.gangs)
        queued = len(self.scheduling)
        sample = (self.now, allocated, running, queued, rate, gpu_w, cpu_w, exact)
        if self.fresh and self.fresh[-1][0] == self.now:
            self.fresh[-1] = sample  # the timeline keeps the last sample of an instant
        else:
            self.fresh.append(sample)

    def check(self, timeline: Timeline) -> None:
        columns = (
            timeline.time_s,
            timeline.allocated_milli,
            timeline.running,
            timeline.queued,
            timeline.fragmentation_rate,
            timeline.power_gpu_w,
            timeline.power_cpu_w,
        )
        assert len(timeline.time_s) == len(self.fresh)
        for k, column in enumerate(columns):
            expected = np.array([sample[k] for sample in self.fresh])
            if k == 4:  # the from-scratch numpy formula sums in another order
                np.testing.assert_allclose(column, expected, rtol=1e-12, atol=1e-12)
                expected = np.array([sample[7] for sample in self.fresh])
            np.testing.assert_array_equal(column, expected)


@pytest.mark.parametrize("placement", ["fgd", "bestfit", "random", "pwr=200,fgd=800"])
def test_every_timeline_sample_equals_the_state_evaluated_from_scratch(placement: str) -> None:
    spec = cluster(node("a", gpus=2, cpu=32000), node("b", gpus=1, model="T4"))
    target = TargetWorkload.from_jobs(JOBS)
    strategy = build_placement(placement, target)
    sim = CheckedSimulator(
        spec, workload(JOBS), strategy, Fifo(), rng=np.random.default_rng(3), target=target
    )
    result = sim.run()
    sim.check(result.timeline)
    assert len(sim.fresh) > len(JOBS) / 2  # a sample per instant with a pass
    assert (np.diff(result.timeline.time_s) > 0).all()  # one sample per instant: the last
    assert result.timeline.queued.max() > 0  # the trace did queue
    assert all(r.finish_s > 0 for r in result.records)


def test_without_a_target_workload_fragmentation_is_nan_and_power_still_tracked() -> None:
    spec = cluster(node("a", gpus=2))
    sim = EventSimulator(
        spec, workload(JOBS[:2]), build_placement("bestfit", None), Fifo(), rng=RNG
    )
    result = sim.run()
    assert all(math.isnan(x) for x in result.timeline.fragmentation_rate)
    # Two V100s at full power while both jobs run on different GPUs... or one shared GPU.
    assert result.timeline.power_gpu_w[0] in (300.0 + 30.0, 600.0)
    assert result.timeline.power_gpu_w[-1] == 60.0  # both idle at the end


def test_arrivals_out_of_order_are_an_error() -> None:
    from gpumosaic.workloads.throughputs import ConstantThroughputs
    from gpumosaic.workloads.workload import Workload

    unsorted = Workload("x", (job(0, arrival=10.0), job(1, arrival=5.0)), ConstantThroughputs())
    sim = EventSimulator(
        cluster(node("a")), unsorted, build_placement("bestfit", None), Fifo(), rng=RNG
    )
    with pytest.raises(ValueError, match="sorted by arrival"):
        sim.run()


def test_the_run_leaves_the_cyclic_collector_as_it_found_it() -> None:
    import gc

    spec = cluster(node("a", gpus=2))
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            sim = EventSimulator(
                spec, workload(JOBS[:2]), build_placement("bestfit", None), Fifo(), rng=RNG
            )
            sim.run()
            assert gc.isenabled() is enabled
        finally:
            gc.enable()
