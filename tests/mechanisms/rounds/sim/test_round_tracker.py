"""The round timeline's figures, kept by the compiled tracker from the touched nodes,
equal fresh numpy evaluations (``node_fragmentation``, ``PowerTracker``) after random
allocations and releases: fragmentation bit for bit, the cluster's sum in numpy's order,
and the watts."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gpumosaic.mechanisms.rounds.sim.tracker import RoundTracker
from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.job import JobSpec
from gpumosaic.model.power import cluster_power_w
from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement.fragmentation import node_fragmentation
from gpumosaic.placement.workload import TargetWorkload


def _target() -> TargetWorkload:
    jobs = [
        JobSpec(id=i, arrival_s=0.0, job_type="t", num_gpu=n, gpu_milli=m, work=1.0, cpu_milli=c)
        for i, (n, m, c) in enumerate(
            [(1, 1000, 0), (1, 500, 2000), (2, 1000, 0), (1, 250, 0), (4, 1000, 8000)] * 3
        )
    ]
    return TargetWorkload.from_jobs(jobs, coverage=1.0)


@settings(max_examples=30, deadline=None)
@given(
    moves=st.lists(
        st.tuples(
            st.integers(0, 11), st.sampled_from([250, 500, 1000]), st.integers(0, 3), st.booleans()
        ),
        max_size=40,
    )
)
def test_remembered_fragmentation_equals_fresh(moves: list[tuple[int, int, int, bool]]) -> None:
    cluster = ClusterSpec.from_counts([("v100", 8), ("k80", 8), ("p100", 8)], gpus_per_node=2)
    state = ClusterState(cluster)
    target = _target()
    tracker = RoundTracker(state, target)
    held: list[int] = []
    for job_id, (node, milli, cpu_k, release) in enumerate(moves):
        if release and held:
            state.release(held.pop(0))
        else:
            gpu = int(np.argmax(state.gpu_free[node]))
            if state.gpu_free[node, gpu] >= milli and state.cpu_free[node] >= 1000 * cpu_k:
                state.allocate(Assignment(job_id, node, (gpu,), milli, 1000 * cpu_k, 0))
                held.append(job_id)
        tracker.refresh()
        assert tracker.node_fragmentation is not None
        fresh = node_fragmentation(state, target)
        np.testing.assert_array_equal(tracker.node_fragmentation, fresh)
        allocated, rate, gpu_w, cpu_w = tracker.figures()
        free = float(state.gpu_free.sum())
        assert allocated == state.total_gpu_milli - free
        assert rate == (float(fresh.sum()) / free if free > 0 else 0.0)
        assert (gpu_w, cpu_w) == cluster_power_w(state)
        assert (gpu_w, cpu_w) == tracker.power_w
        assert rate == tracker.fragmentation_rate
        assert allocated == tracker.allocated_milli
