"""The event simulator's timeline: what it records incrementally (power from the touched
nodes, fragmentation from the shared tracker, reused while nothing changed) equals the
cluster's figures computed from scratch at every sample."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sim_builders import cluster, job, node, workload

from gpumosaic.model.power import cluster_power_w
from gpumosaic.placement.fragmentation import fragmentation_rate
from gpumosaic.placement.registry import build_placement
from gpumosaic.placement.workload import TargetWorkload
from gpumosaic.policies.ordering import Fifo
from gpumosaic.sim.event.simulator import EventSimulator

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
    """Checks every sample against a fresh evaluation of the state at that instant."""

    samples = 0

    def _record(self) -> None:
        super()._record()
        timeline = self.timeline.freeze()
        assert timeline.time_s[-1] == self.now
        assert timeline.allocated_milli[-1] == float(
            (self.state.gpu_capacity - self.state.gpu_free).sum()
        )
        gpu_w, cpu_w = cluster_power_w(self.state)
        assert (timeline.power_gpu_w[-1], timeline.power_cpu_w[-1]) == (gpu_w, cpu_w)
        fresh = fragmentation_rate(self.state, self.tracker.workload)  # type: ignore[arg-type]
        assert timeline.fragmentation_rate[-1] == pytest.approx(fresh, rel=1e-12, abs=1e-12)
        assert timeline.running[-1] == len(self.state.assignments) + len(self.state.gangs)
        assert timeline.queued[-1] == len(self.scheduling)
        self.samples += 1


@pytest.mark.parametrize("placement", ["fgd", "bestfit", "random", "pwr=200,fgd=800"])
def test_every_timeline_sample_equals_the_state_evaluated_from_scratch(placement: str) -> None:
    spec = cluster(node("a", gpus=2, cpu=32000), node("b", gpus=1, model="T4"))
    target = TargetWorkload.from_jobs(JOBS)
    strategy = build_placement(placement, target)
    sim = CheckedSimulator(spec, workload(JOBS), strategy, Fifo(), seed=3, target=target)
    result = sim.run()
    assert sim.samples > len(JOBS)  # a sample per pass (arrivals and departures)
    assert (np.diff(result.timeline.time_s) > 0).all()  # one sample per instant: the last
    assert result.timeline.queued.max() > 0  # the trace did queue
    assert all(r.finish_s > 0 for r in result.records)


def test_without_a_target_workload_fragmentation_is_nan_and_power_still_tracked() -> None:
    spec = cluster(node("a", gpus=2))
    sim = EventSimulator(spec, workload(JOBS[:2]), build_placement("bestfit", None), Fifo())
    result = sim.run()
    assert all(math.isnan(x) for x in result.timeline.fragmentation_rate)
    # Two V100s at full power while both jobs run on different GPUs... or one shared GPU.
    assert result.timeline.power_gpu_w[0] in (300.0 + 30.0, 600.0)
    assert result.timeline.power_gpu_w[-1] == 60.0  # both idle at the end


def test_arrivals_out_of_order_are_an_error() -> None:
    from gpumosaic.workloads.throughputs import ConstantThroughputs
    from gpumosaic.workloads.workload import Workload

    unsorted = Workload("x", (job(0, arrival=10.0), job(1, arrival=5.0)), ConstantThroughputs())
    sim = EventSimulator(cluster(node("a")), unsorted, build_placement("bestfit", None), Fifo())
    with pytest.raises(ValueError, match="sorted by arrival"):
        sim.run()
